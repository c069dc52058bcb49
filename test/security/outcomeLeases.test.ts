/**
 * Outcomes are never lost to a lock. A client role (granted `<schema>_client`) holds another
 * user's workflow row — FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE, or an
 * uncommitted cancel — or the step's own row, or a sibling's row that the finished step must
 * cancel, while the step's tool finishes. The outcome waits
 * past the step's lease (short here: the step's 2 s timeout plus 100 ms of grace) and the
 * watchdog leaves the step alone, because its executor is alive and holds the outcome: the tool
 * ran once, and the workflow completes once the row is let go. Meanwhile another role's
 * workflows complete: one whose outcome came in the same batch, and a new one-step workflow
 * within a second (from its rows' timestamps). If the executor stops while the outcome waits,
 * the step is rescued by the watchdog as before, once. A role with no grants cannot take the locks.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { StepdFileConfig } from '../../src/configFile.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import { TEST_DATABASE_URL } from '../helpers/db.js';
import {
  clientInsert,
  createClientRole,
  getSteps,
  holdRow,
  insertWorkflow,
  onCleanup,
  securityEnv,
  startConfiguredExecutor,
  startLocalServer,
  waitFor,
  waitForWorkflow,
  type ClientRole,
  type RowLockMode,
  type SecurityEnv,
  type TestSchema,
} from './helpers.js';

/** A tool (`counted.call`) that counts its calls per workflow and answers once the test releases the workflow. */
type CountedTool = ToolProvider & { calls: (workflowId: string) => number; inFlight: (workflowId: string) => boolean; release: (...workflowIds: string[]) => void };

function countedTool(): CountedTool {
  const calls = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const released = new Set<string>();
  return {
    prefix: 'counted',
    calls: (id) => calls.get(id) ?? 0,
    inFlight: (id) => waiting.has(id),
    release: (...ids) => {
      for (const id of ids) {
        released.add(id);
        waiting.get(id)?.();
        waiting.delete(id);
      }
    },
    call: (_tool, args, ctx) => {
      calls.set(ctx.workflowId, (calls.get(ctx.workflowId) ?? 0) + 1);
      if (released.has(ctx.workflowId)) return Promise.resolve(args);
      return new Promise((resolve) => waiting.set(ctx.workflowId, () => resolve(args)));
    },
    list: async () => [{ name: 'call' }],
  };
}

/** One step of `tool` with a 2 s timeout: its lease runs out 2.1 s after it started. */
const ONE_STEP = (tool: string, args: unknown) => ({ start: 'x', steps: { x: { tool, args, timeout: '2s', done: true, output: '{{result}}' } } });

/** Short leases: the step's timeout plus 100 ms. */
const SHORT_LEASES = { leaseGraceMs: 100 };

interface Scene {
  env: SecurityEnv;
  t: TestSchema;
  tool: CountedTool;
  /** Another service's role: its workflows must not wait for the held row. */
  other: ClientRole;
  victim: string;
  /** The victim's step whose tool finishes while the row is held, and its name. */
  stepId: string;
  stepName: string;
  executorId: string;
  /** The other role's workflow whose tool finishes in the same tick as the victim's. */
  beside: string;
}

/** The victim's step and another role's step, both in their tool calls. */
async function scene(opts: { victimFlow?: unknown; stepName?: string; inFlight?: () => boolean; config?: StepdFileConfig; victimOfClient?: boolean } = {}): Promise<Scene> {
  const tool = countedTool();
  const env = await securityEnv({ providers: [tool], options: SHORT_LEASES, ...(opts.config ? { config: opts.config } : {}) });
  const { t } = env;
  const other = await createClientRole(t);
  const victimFlow = opts.victimFlow ?? ONE_STEP('counted.call', { v: 'victim' });
  // A client cancels only its own workflows (sql/0038): the cancel scenes hold the client's own.
  const victim = opts.victimOfClient ? await clientInsert(env.client, victimFlow, { name: 'victim' }) : await insertWorkflow(t, victimFlow, {}, { name: 'victim', user: 'victim' });
  const beside = await clientInsert(other, ONE_STEP('counted.call', { v: 'beside' }));
  const victimInFlight = opts.inFlight ?? (() => tool.inFlight(victim));
  await waitFor(() => victimInFlight() && tool.inFlight(beside), 'both tool calls in flight');
  const stepName = opts.stepName ?? 'x';
  const step = (await getSteps(t, victim)).find((r) => r.name === stepName)!;
  return { env, t, tool, other, victim, beside, stepId: step.id, stepName, executorId: step.executor_id! };
}

/** A one-step workflow of the other role completes within a second of its insert (completed_at - created_at). */
async function assertOtherRoleServedWithinASecond(s: Scene): Promise<void> {
  const id = await clientInsert(s.other, { start: 'a', steps: { a: { tool: 'core.echo', args: { served: true }, done: true, output: '{{result}}' } } });
  const wf = await waitForWorkflow(s.t, id);
  expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
  const [row] = await s.t.q<{ ms: number }>(`SELECT extract(epoch FROM completed_at - created_at) * 1000 AS ms FROM stepd.workflows WHERE id = $1`, [id]);
  expect(Number(row!.ms)).toBeLessThan(1_000);
}

/**
 * With the row held: the other role's outcome (same tick) is recorded and a new workflow of it
 * served within a second; the victim's outcome waits past the step's lease, through watchdog
 * sweeps, and the step stays `running` under its executor, its tool called once.
 */
async function assertOutcomeKeptWhileHeld(s: Scene, releaseVictim: () => void, victimCalls: () => number): Promise<void> {
  releaseVictim();
  s.tool.release(s.beside);
  const beside = await waitForWorkflow(s.t, s.beside);
  expect(beside.status, JSON.stringify(beside.error)).toBe('completed');
  expect(beside.output).toEqual({ v: 'beside' });

  await waitFor(
    async () => (await s.t.q<{ past: boolean }>(`SELECT lease_until < now() AS past FROM stepd.workflow_steps WHERE id = $1`, [s.stepId]))[0]?.past === true,
    "the step's lease to run out while its outcome waits",
  );
  // Sweeps after the lease ran out (the executor also sweeps on its own every 100 ms): none rescues the step.
  await s.env.executor.sweep();
  await s.env.executor.sweep();
  const steps = await getSteps(s.t, s.victim);
  expect(steps.filter((r) => r.name === s.stepName).map((r) => [r.attempt, r.status, r.executor_id])).toEqual([[1, 'running', s.executorId]]);
  expect(steps.filter((r) => r.status === 'failed')).toEqual([]);
  expect(victimCalls()).toBe(1);
  await assertOtherRoleServedWithinASecond(s);
}

/** Once the row is let go: the workflow completed with the tool's answer, one attempt, the tool called once. */
async function assertCompletedOnce(s: Scene, victimCalls: () => number, output: Record<string, unknown> = { v: 'victim' }): Promise<void> {
  const done = await waitForWorkflow(s.t, s.victim);
  expect(done.status, JSON.stringify(done.error)).toBe('completed');
  expect(done.output).toMatchObject(output);
  expect((await getSteps(s.t, s.victim)).map((r) => [r.attempt, r.status, r.error])).toEqual([[1, 'done', null]]);
  expect(victimCalls()).toBe(1);
  await s.env.bystander.assertUndisturbedAndServed();
}

describe('a client holding a workflow row while its step finishes', () => {
  it('does not make the finished HTTP call count as lost and run again: the outcome waits past the lease, the call is made once', async () => {
    let requests = 0;
    let answer: (() => void) | undefined;
    const server = await startLocalServer((_req: IncomingMessage, res: ServerResponse) => {
      requests++;
      answer = () => res.end('{"charged":true}');
    });
    const s = await scene({
      victimFlow: ONE_STEP('http.request', { url: `${server.base}/charge`, method: 'POST' }),
      inFlight: () => answer !== undefined,
      config: { http: { allow: [`${server.base}/*`] } },
    });
    const held = await holdRow(s.env.client.pool, s.t, s.victim);
    await assertOutcomeKeptWhileHeld(s, () => answer!(), () => requests);
    await held.release();
    await assertCompletedOnce(s, () => requests, { status: 200, body: '{"charged":true}' });
  });

  for (const mode of ['NO KEY UPDATE', 'SHARE', 'KEY SHARE'] satisfies RowLockMode[]) {
    it(`holding it FOR ${mode} does not either: the tool runs once and the workflow completes once the row is let go`, async () => {
      const s = await scene();
      const held = await holdRow(s.env.client.pool, s.t, s.victim, { mode });
      await assertOutcomeKeptWhileHeld(s, () => s.tool.release(s.victim), () => s.tool.calls(s.victim));
      await held.release();
      await assertCompletedOnce(s, () => s.tool.calls(s.victim));
    });
  }

  it('with a cancel left uncommitted: the tool runs once, and the workflow completes once the cancel is rolled back', async () => {
    const s = await scene({ victimOfClient: true });
    const cancel = (conn: pg.PoolClient) => conn.query(`UPDATE ${s.t.schema}.workflows SET status = 'cancelled' WHERE id = $1 AND status IN ('new', 'running')`, [s.victim]);
    const held = await holdRow(s.env.client.pool, s.t, s.victim, { hold: cancel });
    await assertOutcomeKeptWhileHeld(s, () => s.tool.release(s.victim), () => s.tool.calls(s.victim));
    await held.release('ROLLBACK');
    await assertCompletedOnce(s, () => s.tool.calls(s.victim));
  });

  it('with a cancel committed after the step finished: the workflow ends cancelled, the tool ran once, nothing is lost or retried', async () => {
    const s = await scene({ victimOfClient: true });
    const cancel = (conn: pg.PoolClient) => conn.query(`UPDATE ${s.t.schema}.workflows SET status = 'cancelled' WHERE id = $1 AND status IN ('new', 'running')`, [s.victim]);
    const held = await holdRow(s.env.client.pool, s.t, s.victim, { hold: cancel });
    await assertOutcomeKeptWhileHeld(s, () => s.tool.release(s.victim), () => s.tool.calls(s.victim));
    await held.release('COMMIT');
    const ended = await waitForWorkflow(s.t, s.victim);
    expect(ended.status).toBe('cancelled');
    // The executor's waiting outcome finds the step cancelled (the fence) and records nothing.
    await waitFor(async () => s.env.executor.pendingOutcomes === 0, 'the waiting outcome to be dropped as late');
    expect((await getSteps(s.t, s.victim)).map((r) => [r.attempt, r.status])).toEqual([[1, 'cancelled']]);
    expect(s.tool.calls(s.victim)).toBe(1);
    await s.env.bystander.assertUndisturbedAndServed();
  });
});

describe("a client holding the step's own row while it finishes", () => {
  it("holds back neither the other outcomes of its batch nor the lease: the tool runs once, the step is recorded once it is let go", async () => {
    const s = await scene();
    const held = await holdRow(s.env.client.pool, s.t, s.stepId, { table: 'workflow_steps' });
    await assertOutcomeKeptWhileHeld(s, () => s.tool.release(s.victim), () => s.tool.calls(s.victim));
    await held.release();
    await assertCompletedOnce(s, () => s.tool.calls(s.victim));
  });
});

describe('a client holding a sibling step row that the finished step must cancel', () => {
  it("holds back neither the batch (its last writes meet the lock) nor the lease: the workflow completes once, when it is let go", async () => {
    // "stop" ends the workflow, which cancels "other": the client holds other's row.
    const victimFlow = {
      start: 'fork',
      steps: {
        fork: { parallel: ['stop', 'other'], join: 'merge' },
        stop: { tool: 'counted.call', args: { v: 'victim' }, timeout: '2s', done: true, output: '{{result}}' },
        other: { tool: 'core.sleep', args: { ms: 600_000 }, timeout: '10m' },
        merge: { tool: 'core.echo' },
      },
    };
    const s = await scene({ victimFlow, stepName: 'stop' });
    const other = await waitFor(async () => (await getSteps(s.t, s.victim)).find((r) => r.name === 'other' && r.status === 'running'), 'the other branch running');
    const held = await holdRow(s.env.client.pool, s.t, other.id, { table: 'workflow_steps' });
    await assertOutcomeKeptWhileHeld(s, () => s.tool.release(s.victim), () => s.tool.calls(s.victim));
    await held.release();
    const done = await waitForWorkflow(s.t, s.victim);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.output).toEqual({ v: 'victim' });
    const steps = await getSteps(s.t, s.victim);
    expect(steps.filter((r) => r.name !== 'fork').map((r) => [r.name, r.attempt, r.status])).toEqual([
      ['stop', 1, 'done'],
      ['other', 1, 'cancelled'],
    ]);
    expect(s.tool.calls(s.victim)).toBe(1);
    await s.env.bystander.assertUndisturbedAndServed();
  });
});

describe('an executor that stops while an outcome waits for a held row', () => {
  it('leaves the step to the watchdog, which rescues it as before, once: one lost attempt, then a retry that completes', async () => {
    const retried = { start: 'x', steps: { x: { tool: 'counted.call', args: { v: 'victim' }, timeout: '2s', retry: { maxAttempts: 3, initial: '10ms' }, done: true, output: '{{result}}' } } };
    const s = await scene({ victimFlow: retried });
    const held = await holdRow(s.env.client.pool, s.t, s.victim);
    await assertOutcomeKeptWhileHeld(s, () => s.tool.release(s.victim), () => s.tool.calls(s.victim));

    // Another executor takes over; the first stops without recording the outcome (its row is still held).
    await startConfiguredExecutor(s.t, {}, { providers: [s.tool], options: { ...SHORT_LEASES, heartbeatIntervalMs: 100, deadAfterMs: 400 } });
    await s.env.executor.stop({ graceMs: 0 });
    expect((await getSteps(s.t, s.victim)).map((r) => [r.attempt, r.status])).toEqual([[1, 'running']]);

    await held.release();
    const done = await waitForWorkflow(s.t, s.victim);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    const steps = await getSteps(s.t, s.victim);
    expect(steps.map((r) => [r.attempt, r.status, (r.error as { code?: string } | null)?.code ?? null])).toEqual([
      [1, 'failed', 'lost'],
      [2, 'done', null],
    ]);
    // Its outcome went with the stopped executor: the retry called the tool a second time, and only once more.
    expect(s.tool.calls(s.victim)).toBe(2);
  });
});

describe('a role with no grants at all', () => {
  it("cannot take a workflow's or a step's row lock: refused, and the finished step is recorded at once", async () => {
    const s = await scene();
    const role = `nogrant_${randomBytes(5).toString('hex')}`;
    await s.t.db.query(`CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
    const url = new URL(TEST_DATABASE_URL);
    url.username = role;
    url.password = '';
    const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
    pool.on('error', () => {});
    onCleanup(async () => {
      await pool.end().catch(() => {});
      await s.t.db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]).catch(() => {});
      await s.t.db.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`);
    });
    for (const [table, id] of [['workflows', s.victim], ['workflow_steps', s.stepId]] as const) {
      for (const mode of ['UPDATE', 'KEY SHARE'] satisfies RowLockMode[]) {
        const err = await holdRow(pool, s.t, id, { table, mode }).then(
          () => undefined,
          (e: { code?: string }) => e,
        );
        expect(err?.code, `FOR ${mode} on ${table}`).toBe('42501');
      }
    }
    s.tool.release(s.victim, s.beside);
    await assertCompletedOnce(s, () => s.tool.calls(s.victim));
  });
});
