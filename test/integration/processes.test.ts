/**
 * Executors as real processes (the built CLI): a crash mid-step, a restart under the same id,
 * two executors sharing one database, and the two-stage shutdown. Driven only through SQL.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { killHard, spawnExecutor } from '../helpers/processes.js';

/** One core.sleep step; fast retries so a rescued attempt runs at once. */
function sleepFlow(ms: number, timeout: string) {
  return { start: 'nap', steps: { nap: { tool: 'core.sleep', args: { ms }, timeout, retry: { initial: '50ms', max: '100ms' }, done: true } } };
}

/** Executor ids unique to this test (pg_stat_activity is shared with every other test run). */
const executorIds = (t: TestSchema) => (name: string) => `exec-${name}-${t.schema}`;

async function runningUnder(t: TestSchema, workflowId: string, executorId: string) {
  return waitFor(
    async () => (await getSteps(t, workflowId)).find((s) => s.status === 'running' && s.executor_id === executorId),
    `a step of workflow ${workflowId} running under ${executorId}`,
  );
}

describe('executors as processes', () => {
  it('rescues a step whose executor was killed with SIGKILL mid-step once its lease runs out', async () => {
    const t = await createTestSchema();
    const exec = executorIds(t);
    const a = await spawnExecutor(t, { executorId: exec('a'), leaseGrace: '200ms' });
    const id = await insertWorkflow(t, sleepFlow(2_000, '4s'));
    const claimed = await runningUnder(t, id, exec('a'));
    // The lease is the step's timeout plus the grace (4.2s), not a fixed default: wait for it to be
    // set (the claim may set a provisional lease first).
    let leaseS: number | null = null;
    await waitFor(async () => {
      const [row] = await t.q(`SELECT extract(epoch FROM lease_until - started_at)::float AS s FROM stepd.workflow_steps WHERE id = $1`, [claimed.id]);
      if (row.s === null) throw new Error('the step stopped running');
      leaseS = row.s;
      return leaseS !== null && leaseS < 5;
    }, 'the lease').catch(() => {
      throw new Error(`lease_until - started_at is ${leaseS}s; expected the step timeout (4s) + lease grace (200ms)`);
    });
    expect(leaseS).toBeGreaterThanOrEqual(4.2);

    await killHard(t, a);
    expect((await getSteps(t, id)).map((s) => [s.status, s.executor_id])).toEqual([['running', exec('a')]]);
    await spawnExecutor(t, { executorId: exec('b'), leaseGrace: '200ms' });

    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.attempt, s.status, s.executor_id])).toEqual([
      [1, 'failed', exec('a')],
      [2, 'done', exec('b')],
    ]);
    expect(steps[0]!.error).toMatchObject({ code: 'lost', retryable: true });
  });

  it('recovers its own orphaned step at once when restarted with the same executor id', async () => {
    const t = await createTestSchema();
    const exec = executorIds(t);
    const first = await spawnExecutor(t, { executorId: exec('same'), leaseGrace: '10m' });
    const id = await insertWorkflow(t, sleepFlow(3_000, '10m'));
    const claimed = await runningUnder(t, id, exec('same'));
    await killHard(t, first);

    await spawnExecutor(t, { executorId: exec('same'), leaseGrace: '10m' });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.attempt, s.status, s.executor_id])).toEqual([
      [1, 'failed', exec('same')],
      [2, 'done', exec('same')],
    ]);
    expect(steps[0]).toMatchObject({ id: claimed.id, error: { code: 'lost', retryable: true } });
    // Recovered at start-up, long before the lease (10 minutes and more) would have let the watchdog act.
    expect(steps[0]!.completed_at!.getTime()).toBeLessThan(claimed.lease_until!.getTime());
  });

  it('shares one database between two executors: every join once, no step run twice', async () => {
    const t = await createTestSchema();
    const exec = executorIds(t);
    // Every claim is announced by the database as a step.started event: count them per row.
    const events = new pg.Client({ connectionString: t.url });
    await events.connect();
    onCleanup(() => events.end());
    const starts = new Map<string, number>();
    events.on('notification', (m) => {
      const e = JSON.parse(m.payload!) as { type: string; schema: string; stepId: string };
      if (e.type === 'step.started' && e.schema === t.schema) starts.set(e.stepId, (starts.get(e.stepId) ?? 0) + 1);
    });
    await events.query('LISTEN stepd_events');
    await Promise.all([
      spawnExecutor(t, { executorId: exec('1'), concurrency: 3 }),
      spawnExecutor(t, { executorId: exec('2'), concurrency: 3 }),
    ]);
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const width = 2 + (i % 3);
      const branches = Array.from({ length: width }, (_, b) => `b${b}`);
      const steps: Record<string, unknown> = {
        fan: { parallel: branches, join: 'join' },
        join: { tool: 'core.echo', args: { all: '{{results}}' }, done: true },
      };
      for (const b of branches) steps[b] = { tool: 'core.noop' };
      ids.push(await insertWorkflow(t, { start: 'fan', steps }, {}, { name: `wf${i}` }));
    }
    for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');

    const joins = await t.q<{ workflow_id: string; n: number }>(
      `SELECT workflow_id, count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'join' GROUP BY workflow_id`,
    );
    expect(joins).toHaveLength(30);
    expect(joins.every((j) => j.n === 1)).toBe(true);
    const [dupes] = await t.q(
      `SELECT count(*)::int AS rows, count(DISTINCT (workflow_id, name, attempt))::int AS distinct_rows, max(attempt) AS max_attempt
         FROM stepd.workflow_steps`,
    );
    expect(dupes.rows).toBe(dupes.distinct_rows);
    expect(dupes.max_attempt).toBe(1);
    expect(await t.q(`SELECT id FROM stepd.workflow_steps WHERE status <> 'done'`)).toEqual([]);
    const [who] = await t.q(`SELECT count(DISTINCT executor_id)::int AS n FROM stepd.workflow_steps WHERE tool IS NOT NULL`);
    expect(who.n).toBe(2);
    const toolRows = await t.q<{ id: string }>(`SELECT id FROM stepd.workflow_steps WHERE tool IS NOT NULL`);
    await waitFor(() => starts.size >= toolRows.length, 'a step.started event for every tool step');
    expect([...starts.values()].every((n) => n === 1)).toBe(true);
    expect([...starts.keys()].sort()).toEqual(toolRows.map((r) => r.id).sort());
  });

  it('hands a running step back as ready on SIGTERM after the grace, without spending an attempt', async () => {
    const t = await createTestSchema();
    const exec = executorIds(t);
    const a = await spawnExecutor(t, { executorId: exec('stop'), shutdownGrace: '100ms' });
    const id = await insertWorkflow(t, sleepFlow(2_000, '1m'));
    const claimed = await runningUnder(t, id, exec('stop'));

    a.signal('SIGTERM');
    expect(await a.waitForExit()).toEqual({ code: 0, signal: null });
    const [row] = await getSteps(t, id);
    expect(row).toMatchObject({ id: claimed.id, status: 'ready', attempt: 1, executor_id: null, started_at: null, lease_until: null });

    await spawnExecutor(t, { executorId: exec('next') });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    expect((await getSteps(t, id)).map((s) => [s.id, s.attempt, s.status, s.executor_id])).toEqual([[claimed.id, 1, 'done', exec('next')]]);
  });

  it('exits at once on a second signal while waiting for running steps', async () => {
    const t = await createTestSchema();
    const exec = executorIds(t);
    const a = await spawnExecutor(t, { executorId: exec('twice'), shutdownGrace: '10m' });
    const id = await insertWorkflow(t, sleepFlow(600_000, '20m'));
    await runningUnder(t, id, exec('twice'));

    a.signal('SIGTERM');
    await a.waitForLog('waiting for running steps');
    expect(a.hasExited()).toBe(false);
    a.signal('SIGTERM');
    const exit = await a.waitForExit();
    expect(exit.signal).toBeNull();
    expect(exit.code).not.toBe(0);
    // Left for the watchdog: the step is still running under the executor that went away.
    expect((await getSteps(t, id)).map((s) => [s.status, s.executor_id])).toEqual([['running', exec('twice')]]);
  });
});
