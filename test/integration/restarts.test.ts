/**
 * PostgreSQL restarts and outages, against a private cluster (never the shared server): the
 * executor stays alive, reconnects, keeps the outcomes of steps that finished while the database
 * was away and writes them when it returns, and every workflow completes with no step done twice.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreTools } from '../../src/tools/builtins.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { Executor, DEFAULT_EXECUTOR_OPTIONS } from '../../src/executor/executor.js';
import { insertWorkflow, onCleanup, waitFor, type TestSchema } from '../helpers/db.js';
import { createClusterSchema, startPrivateCluster, type PrivateCluster } from '../helpers/privateCluster.js';
import { spawnExecutor } from '../helpers/processes.js';

/** A tool whose calls block until the test opens the latch; counts calls and returns per step. */
function latchTool() {
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => (open = r));
  const calls = new Map<string, number>();
  let returned = 0;
  const tool: ToolProvider = {
    prefix: 'latch',
    async call(_name, _args, ctx) {
      const key = `${ctx.workflowId}/${ctx.stepName}`;
      calls.set(key, (calls.get(key) ?? 0) + 1);
      await opened;
      returned++;
      return { ok: true };
    },
    async list() {
      return [{ name: 'wait' }];
    },
  };
  return { tool, open, calls, returned: () => returned };
}

/** A logger whose lines the test can read. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

const CHAIN = {
  start: 's1',
  steps: Object.fromEntries(
    Array.from({ length: 12 }, (_, i) => [`s${i + 1}`, { tool: 'core.echo', args: { i }, ...(i < 11 ? { next: `s${i + 2}` } : {}) }]),
  ),
};
const LATCHED = { start: 'hold', steps: { hold: { tool: 'latch.wait', next: 'after' }, after: { tool: 'core.echo', args: { x: 1 } } } };

async function startInProcess(t: TestSchema, tools: ToolProvider[], executorId: string, beats: { heartbeatIntervalMs?: number; deadAfterMs?: number } = {}) {
  const { log, lines } = capturingLogger();
  const executor = new Executor(
    {
      ...DEFAULT_EXECUTOR_OPTIONS,
      databaseUrl: t.url,
      schema: t.schema,
      executorId,
      concurrency: 16,
      pollIntervalMs: 50,
      watchdogIntervalMs: 100,
      shutdownGraceMs: 2_000,
      ...beats,
    },
    { log, tools: new ToolRegistry([new CoreTools(), ...tools]) },
  );
  await executor.start();
  onCleanup(() => executor.stop({ graceMs: 0 }));
  return { executor, lines };
}

/** Every step name of every workflow is done exactly once; every workflow completed. */
async function expectAllCompletedOnce(t: TestSchema, ids: string[]) {
  const wfs = await t.q<{ id: string; status: string }>(`SELECT id, status FROM stepd.workflows WHERE id = ANY($1::bigint[])`, [ids]);
  expect(wfs.filter((w) => w.status !== 'completed')).toEqual([]);
  const doubles = await t.q(
    `SELECT workflow_id, name, count(*)::int AS n FROM stepd.workflow_steps
      WHERE status = 'done' GROUP BY workflow_id, name HAVING count(*) > 1`,
  );
  expect(doubles).toEqual([]);
}

async function allTerminal(t: TestSchema, ids: string[]): Promise<boolean> {
  const rows = await t.q<{ n: number }>(
    `SELECT count(*)::int AS n FROM stepd.workflows WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'cancelled')`,
    [ids],
  );
  return rows[0]!.n === ids.length;
}

describe('PostgreSQL restarts', () => {
  let cluster: PrivateCluster;
  beforeAll(async () => {
    cluster = await startPrivateCluster();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  for (const mode of ['immediate', 'fast'] as const) {
    it(`survives a restart (-m ${mode}) with steps in flight and writes their outcomes after it`, async () => {
      const t = await createClusterSchema(cluster);
      const latch = latchTool();
      const { lines } = await startInProcess(t, [latch.tool], `restart-${mode}`);
      const held = await Promise.all(Array.from({ length: 4 }, () => insertWorkflow(t, LATCHED)));
      await waitFor(() => latch.calls.size === held.length, 'every held step to be running');
      // Keep transactions busy while the server goes away.
      const busy = await Promise.all(Array.from({ length: 20 }, () => insertWorkflow(t, CHAIN)));

      await cluster.restart(mode);
      latch.open();

      await waitFor(() => allTerminal(t, [...held, ...busy]), 'every workflow to finish', 60_000);
      await expectAllCompletedOnce(t, [...held, ...busy]);
      const holds = await t.q<{ status: string; attempt: number; error: unknown }>(
        `SELECT status, attempt, error FROM stepd.workflow_steps WHERE name = 'hold' ORDER BY id`,
      );
      expect(holds).toEqual(held.map(() => ({ status: 'done', attempt: 1, error: null })));
      expect([...latch.calls.values()].every((n) => n === 1)).toBe(true);
      // One warning when the outage starts, one line when it ends — not one per iteration.
      expect(lines.filter((l) => l.msg === 'database unreachable').length).toBeLessThanOrEqual(2);
      expect(lines.filter((l) => l.level === 50)).toEqual([]);
    });
  }

  it('keeps outcomes finished during an outage and records them once the database is back', async () => {
    const t = await createClusterSchema(cluster);
    const latch = latchTool();
    const { executor, lines } = await startInProcess(t, [latch.tool], 'outage');
    const held = await Promise.all(Array.from({ length: 3 }, () => insertWorkflow(t, LATCHED)));
    await waitFor(() => latch.calls.size === held.length, 'every held step to be running');

    await cluster.stop('fast');
    latch.open();
    await waitFor(() => latch.returned() === held.length, 'the held steps to return');
    // The outcomes wait while the database is down: the executor retries them, it does not drop them.
    // A few seconds: six retries with backoff doubling from 100 ms.
    await waitFor(
      () => lines.filter((l) => l.msg === 'outcomes not recorded yet: database unreachable; retrying').length >= 6,
      'the outcomes to be retried during the outage',
    );
    expect(executor.pendingOutcomes).toBe(held.length);
    await cluster.start();

    await waitFor(() => allTerminal(t, held), 'the held workflows to finish', 60_000);
    await expectAllCompletedOnce(t, held);
    const holds = await t.q<{ status: string; attempt: number }>(`SELECT status, attempt FROM stepd.workflow_steps WHERE name = 'hold'`);
    expect(holds).toEqual(held.map(() => ({ status: 'done', attempt: 1 })));
    expect(lines.filter((l) => l.msg === 'database unreachable')).toHaveLength(1);
    expect(lines.filter((l) => l.msg === 'database reachable again')).toHaveLength(1);
    // LISTEN is back, and the listener's new session holds the executor id and the watchdog lease again
    // (rows of executor_leases naming it; no advisory lock).
    await waitFor(() => lines.some((l) => l.msg === 'listener reconnected; listening again'), 'the listener to reconnect');
    await waitFor(async () => {
      const [row] = await t.q<{ n: number }>(
        `SELECT count(*)::int AS n FROM stepd.executor_leases l JOIN pg_stat_activity a ON a.pid = l.session_pid
          WHERE l.name IN ('executor:outage', 'watchdog') AND a.application_name = 'stepd-executor:outage'`,
      );
      return row!.n === 2;
    }, 'the executor id and the watchdog lease to be held again');
    const advisory = await t.q(
      `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND a.application_name = 'stepd-executor:outage'`,
    );
    expect(advisory).toEqual([]);
  });

  it('rescues no live executor after a restart, though every beat is older than dead-after', async () => {
    const t = await createClusterSchema(cluster);
    const latch = latchTool();
    // Dead-after well above a busy machine's pauses, so only the outage makes the beats stale.
    const beats = { heartbeatIntervalMs: 300, deadAfterMs: 1_500 };
    const { lines } = await startInProcess(t, [latch.tool], 'beats-a', beats);
    await startInProcess(t, [latch.tool], 'beats-b', beats);
    const held = await Promise.all(Array.from({ length: 6 }, () => insertWorkflow(t, LATCHED)));
    await waitFor(() => latch.calls.size === held.length, 'every held step to be running');
    await cluster.stop('immediate');
    // Down for longer than dead-after (six missed beats of 300 ms > 1.5 s): every executor's
    // last beat is stale when the server is back.
    await waitFor(
      () => lines.filter((l) => l.msg === 'database still unreachable' && l.where === 'heartbeat').length >= 6,
      'six missed beats',
    );
    await cluster.start();
    latch.open();
    await waitFor(() => allTerminal(t, held), 'the held workflows to finish', 60_000);
    await expectAllCompletedOnce(t, held);
    const lost = await t.q(`SELECT id FROM stepd.workflow_steps WHERE error->>'code' = 'lost'`);
    expect(lost).toEqual([]);
    expect([...latch.calls.values()].every((n) => n === 1)).toBe(true);
  });

  it('a daemon process stays alive through an immediate restart while transactions are running', async () => {
    const t = await createClusterSchema(cluster);
    const daemon = await spawnExecutor(t, { executorId: 'restart-daemon', concurrency: 8 });
    const ids = await Promise.all(Array.from({ length: 30 }, () => insertWorkflow(t, CHAIN)));
    await waitFor(
      async () => (await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE status = 'done'`))[0]!.n > 20,
      'work under way',
    );
    await cluster.restart('immediate');
    await waitFor(() => allTerminal(t, ids), 'every workflow to finish', 60_000);
    expect(daemon.hasExited()).toBe(false);
    await expectAllCompletedOnce(t, ids);
    await daemon.waitForLog('database reachable again');
  });
});
