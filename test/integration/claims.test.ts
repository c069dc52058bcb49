/**
 * Claims that are exact and robust: a row the database refuses to claim fails only its own
 * workflow; an executor never runs more tool calls at once than its concurrency; gates and
 * timers take no tool slot; a burst of workflows spreads over the executors running.
 */
import { describe, expect, it } from 'vitest';
import { createLimitPolicy } from '../../src/tools/limits.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { ProbeTools } from '../helpers/probe.js';

const gateThenEcho = (gate: string) => ({
  start: gate,
  steps: { [gate]: { approval: true, next: 'after' }, after: { tool: 'core.echo', args: { from: gate } } },
});

/** A trigger in the test schema that refuses to start any step named `poison`, as a too-long NOTIFY payload would. */
async function refuseToClaimStepsNamedPoison(t: TestSchema): Promise<void> {
  await t.q(`CREATE FUNCTION stepd.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'payload string too long (test)' USING ERRCODE = '22023'; END $$`);
  await t.q(`CREATE TRIGGER refuse_poison BEFORE UPDATE OF status ON stepd.workflow_steps FOR EACH ROW
             WHEN (OLD.status = 'ready' AND NEW.status = 'running' AND NEW.name = 'poison')
             EXECUTE FUNCTION stepd.refuse_poison()`);
}

describe('claims', () => {
  it("claims a step row whose name is ~8,000 bytes: the step.started NOTIFY is bounded in SQL, so it can't fail the claim", async () => {
    const t = await createTestSchema();
    const victim = await insertWorkflow(t, gateThenEcho('g'));
    await startExecutor(t);
    await waitForStep(t, victim, 'g', 'pending');
    // Flows refuse such names; a row written by an older version (or by hand as the owner) has one.
    const long = 'n'.repeat(8_000);
    const session = await t.db.connect();
    try {
      await session.query(`SET stepd.executor = 'on'`);
      await session.query(`INSERT INTO ${t.schema}.workflow_steps (workflow_id, name, tool, status, ready_at) VALUES ($1, $2, NULL, 'ready', now())`, [victim, long]);
    } finally {
      await session.query(`RESET stepd.executor`);
      session.release();
    }
    const other = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { v: 1 } } } });
    expect((await waitForWorkflow(t, other)).status).toBe('completed');
    // Claimed and run (its name is not in the flow), not isolated as a row the claim cannot take.
    const row = await waitFor(async () => (await getSteps(t, victim)).find((s) => s.name === long && s.status === 'failed'), 'the long-named row to run');
    expect(row.error).toMatchObject({ code: 'unknown_step' });
    // Nothing can follow a step the flow does not know: its workflow fails, naming it.
    expect((await waitForWorkflow(t, victim)).error).toMatchObject({ code: 'unknown_step' });
  });


  it.each([
    ['without limits', undefined],
    ['with limits', { tools: { 'core.*': 50 } }],
  ] as const)('fails only the workflow of a step the database refuses to claim; the others in the batch complete (%s)', async (_label, limits) => {
    const t = await createTestSchema();
    await refuseToClaimStepsNamedPoison(t);
    await startExecutor(t, limits ? { limits: createLimitPolicy(limits) } : {});
    const good = await Promise.all(Array.from({ length: 5 }, () => insertWorkflow(t, gateThenEcho('ok'))));
    const bad = await insertWorkflow(t, gateThenEcho('poison'));
    for (const id of good) await waitForStep(t, id, 'ok', 'pending');
    await waitForStep(t, bad, 'poison', 'pending');
    // One statement readies them all, so they are claimed in one batch.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE status = 'pending'`);

    for (const id of good) expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { from: 'ok' } });
    const failed = await waitForWorkflow(t, bad);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'claim_failed', step: 'poison' });
    expect(failed.error!.message).toContain('payload string too long');
    expect((await getSteps(t, bad)).map((s) => [s.name, s.status])).toEqual([['poison', 'cancelled']]);

    // Claims go on afterwards.
    const later = await insertWorkflow(t, { start: 'e', steps: { e: { tool: 'core.echo', args: { n: 1 } } } });
    expect((await waitForWorkflow(t, later)).status).toBe('completed');
  });

  it('never runs more tool calls at once than its concurrency, claims and claim-on-create together', async () => {
    const t = await createTestSchema();
    const probe = new ProbeTools();
    await startExecutor(t, { tools: [probe], concurrency: 4 });
    const flow = {
      start: 'first',
      steps: {
        first: { tool: 'probe.hold', args: { ms: 5 }, next: 'each' },
        each: { forEach: { items: '{{input.items}}', step: 'call', concurrency: 8 }, join: 'last' },
        call: { tool: 'probe.hold', args: { ms: 10 } },
        last: { tool: 'probe.hold', args: { ms: 5 } },
      },
    };
    const ids = await Promise.all(Array.from({ length: 12 }, () => insertWorkflow(t, flow, { items: [1, 2, 3, 4, 5, 6] })));
    for (const id of ids) expect((await waitForWorkflow(t, id, undefined, 60_000)).status).toBe('completed');
    expect(probe.calls).toBe(12 * 8);
    expect(probe.max).toBeLessThanOrEqual(4);
    expect(probe.max).toBeGreaterThanOrEqual(2);
  });

  it("loses no step when the executor's connections are killed in the middle of its claims", async () => {
    const t = await createTestSchema();
    // Two slots for sixty steps that each wait: most of them are claimed by the claim loop, in
    // transactions of their own (claimSteps.ts), which the kills below cut at any statement.
    await startExecutor(t, { concurrency: 2 });
    const flow = { start: 'a', steps: { a: { tool: 'core.sleep', args: { ms: 5 }, done: true, output: '{{result}}' } } };
    const ids = await Promise.all(Array.from({ length: 60 }, () => insertWorkflow(t, flow)));
    let kills = 0;
    await waitFor(async () => {
      // Only this test's executor: backends in a transaction holding a lock on this schema's
      // steps (the other files' executors share the database and the application name).
      const killed = await t.q(
        `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
          WHERE a.application_name = 'stepd-executor' AND a.xact_start IS NOT NULL AND a.pid <> pg_backend_pid()
            AND a.datname = current_database() AND a.query ILIKE '%workflow_steps%'
            AND EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
                         WHERE l.pid = a.pid AND n.nspname = $1 AND c.relname = 'workflow_steps')`,
        [t.schema],
      );
      kills += killed.length;
      const [left] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status <> 'completed'`);
      return kills >= 5 || left!.n === 0;
    }, 'five executor transactions killed');
    expect(kills).toBeGreaterThan(0);
    for (const id of ids) {
      const wf = await waitForWorkflow(t, id, undefined, 60_000);
      expect(wf.status).toBe('completed');
      expect(wf.output).toEqual({ slept: 5 });
    }
    const [r] = await t.q<{ live: number; done: number }>(
      `SELECT count(*) FILTER (WHERE status IN ('ready', 'running'))::int AS live, count(DISTINCT workflow_id) FILTER (WHERE status = 'done')::int AS done
         FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[])`,
      [ids],
    );
    expect(r).toEqual({ live: 0, done: 60 });
  });

  it('runs readied gates and due timers while every tool slot is busy', async () => {
    const t = await createTestSchema();
    const probe = new ProbeTools();
    probe.holdUntilReleased();
    await startExecutor(t, { tools: [probe], concurrency: 1 });
    const busy = await insertWorkflow(t, { start: 'h', steps: { h: { tool: 'probe.hold', args: {} } } });
    await waitFor(() => probe.inFlight === 1, 'the only slot to be taken');
    const gate = await insertWorkflow(t, { start: 'g', steps: { g: { approval: true } } });
    const timer = await insertWorkflow(t, { start: 'w', steps: { w: { wait: '10ms' } } });
    const g = await waitForStep(t, gate, 'g', 'pending');
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [g.id]);
    expect((await waitForWorkflow(t, gate)).status).toBe('completed');
    expect((await waitForWorkflow(t, timer)).status).toBe('completed');
    expect(probe.inFlight).toBe(1);
    probe.releaseAll();
    expect((await waitForWorkflow(t, busy)).status).toBe('completed');
  });

  it('spreads a burst of workflows inserted in one statement over two executors', async () => {
    const t = await createTestSchema();
    const probe = new ProbeTools();
    // The default poll interval: the executors learn of the burst from its NOTIFY, not from polling.
    const opts = { tools: [probe], concurrency: 8, pollIntervalMs: 1_000 };
    await startExecutor(t, { ...opts, executorId: 'burst-a' });
    await startExecutor(t, { ...opts, executorId: 'burst-b' });
    const flow = {
      start: 'fork',
      steps: {
        fork: { parallel: ['x', 'y', 'z'], join: 'done' },
        x: { tool: 'probe.hold', args: { ms: 20 } },
        y: { tool: 'probe.hold', args: { ms: 20 } },
        z: { tool: 'probe.hold', args: { ms: 20 } },
        done: { tool: 'core.noop', args: {} },
      },
    };
    const rows = await t.q<{ id: string }>(
      `INSERT INTO stepd.workflows (name, flow, created_by) SELECT 'burst', $1, 'alice' FROM generate_series(1, 40) RETURNING id`,
      [JSON.stringify(flow)],
    );
    for (const r of rows) expect((await waitForWorkflow(t, r.id, undefined, 60_000)).status).toBe('completed');
    const perExecutor = await t.q<{ executor_id: string; n: number }>(
      `SELECT executor_id, count(*)::int AS n FROM stepd.workflow_steps WHERE tool = 'probe.hold' GROUP BY executor_id`,
    );
    const share = new Map(perExecutor.map((r) => [r.executor_id, r.n]));
    const total = 40 * 3;
    expect([...share.values()].reduce((x, y) => x + y, 0)).toBe(total);
    for (const id of ['burst-a', 'burst-b']) expect(share.get(id) ?? 0).toBeGreaterThanOrEqual(total * 0.25);
    expect(probe.max).toBeLessThanOrEqual(16);
  });
});
