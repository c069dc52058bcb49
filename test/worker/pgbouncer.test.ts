/**
 * The worker SDK through PgBouncer in transaction mode: no session survives between two calls,
 * and LISTEN delivers nothing, so `listen: 'auto'` finds out and the workers poll with back-off.
 * 500 tasks, two worker processes: none lost, none done twice.
 */
import { describe, expect, it } from 'vitest';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { createTestSchema, startExecutor, waitFor } from '../helpers/db.js';
import { startPgBouncer } from '../helpers/pgbouncer.js';
import { createLoginRole } from '../security/helpers.js';
import { spawnWorker } from './helpers.js';

const TASKS = 500;

describe('workers behind PgBouncer (transaction mode)', () => {
  it(`run ${TASKS} tasks with none lost or done twice, polling since LISTEN cannot work there`, async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const { role } = await createLoginRole(t, `${t.schema}_worker`, `wrk_${t.schema}`);
    const bouncer = await startPgBouncer({ roles: [role] });
    const url = bouncer.urlFor(role);
    // 50 ms a task: one worker alone would need about 3 s for all of them, longer than the other's
    // longest idle poll (1 s), so both take part (instant tasks could all go to whichever polled first).
    const env = { WORKER_CONCURRENCY: '8', WORKER_TOOL_MS: '50' };
    const workers = [await spawnWorker(t, url, env), await spawnWorker(t, url, env)];
    for (const w of workers) expect(w.events[0]!.listening).toBe(false);
    const flow = { start: 'c', steps: { c: { tool: 'billing.charge', args: { amount: '{{input.n}}' }, done: true, output: '{{result}}' } } };
    await t.q(
      `INSERT INTO stepd.workflows (name, flow, input) SELECT 'bounced', $1::jsonb, jsonb_build_object('n', n) FROM generate_series(1, ${TASKS}) n`,
      [JSON.stringify(flow)],
    );
    await waitFor(
      async () => (await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status IN ('completed', 'failed', 'cancelled')`))[0]!.n === TASKS,
      'every workflow to end',
      180_000,
    );
    const [counts] = await t.q<{ completed: number; steps: number; done: number; outputs: number }>(
      `SELECT (SELECT count(*)::int FROM stepd.workflows WHERE status = 'completed') AS completed,
              (SELECT count(*)::int FROM stepd.workflow_steps) AS steps,
              (SELECT count(*)::int FROM stepd.workflow_steps WHERE status = 'done' AND attempt = 1) AS done,
              (SELECT count(*)::int FROM stepd.workflows WHERE output->>'id' = 'ch_' || (input->>'n')) AS outputs`,
    );
    expect(counts).toEqual({ completed: TASKS, steps: TASKS, done: TASKS, outputs: TASKS });
    const starts = workers.flatMap((w) => w.events.filter((e) => e.event === 'start'));
    expect(starts).toHaveLength(TASKS);
    expect(new Set(starts.map((e) => e.stepId)).size).toBe(TASKS);
    const ends = workers.flatMap((w) => w.events.filter((e) => e.event === 'end'));
    await waitFor(() => workers.flatMap((w) => w.events.filter((e) => e.event === 'end')).length === TASKS, 'every end to be logged');
    expect(new Set(workers.flatMap((w) => w.events.filter((e) => e.event === 'end').map((e) => e.end)))).toEqual(new Set(['finished']));
    expect(ends.length).toBeLessThanOrEqual(TASKS);
    // Both workers took part.
    for (const w of workers) expect(w.events.some((e) => e.event === 'start')).toBe(true);
  });
});
