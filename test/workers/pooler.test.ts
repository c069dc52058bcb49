/**
 * The worker contract through Debian's PgBouncer in transaction mode (a server connection is a
 * worker's for one transaction only): no call needs session state, so workers that poll (no
 * LISTEN) serve every task through a pool of two server connections, none lost, none done twice.
 * The docs' own workers through the pooler: docsWorkers.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor } from '../helpers/db.js';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { startPgbouncer, startPythonWorker, workerRole } from './workerHelpers.js';

describe('workers through PgBouncer (transaction mode)', () => {
  it('3 polling workers share two server connections: 500 tasks, none lost, none done twice', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })], concurrency: 16 });
    const { role } = await workerRole(t);
    const database = new URL(t.url).pathname.slice(1);
    const { url, show } = await startPgbouncer(role, database);
    const workers = await Promise.all([0, 1, 2].map(() => startPythonWorker(t, url, { max: 10 })));
    const flow = {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.orders}}', step: 'charge' }, join: 'sum' },
        charge: { tool: 'billing.charge', args: { order: '{{item}}', amount: 1 } },
        sum: { tool: 'core.echo', args: { results: '{{results}}' }, done: true, output: '{{result.results}}' },
      },
    };
    for (let w = 0; w < 10; w++) await insertWorkflow(t, flow, { orders: Array.from({ length: 50 }, (_, i) => `${w}-${i}`) });
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status IN ('new', 'running')`);
      return r!.n === 0;
    }, 'every workflow to end', 180_000);
    const ended = await t.q<{ status: string; output: unknown[] }>(`SELECT status, output FROM stepd.workflows`);
    expect(ended.every((w) => w.status === 'completed' && w.output.length === 50)).toBe(true);
    const done = workers.flatMap((w) => w.lines().filter((l) => l.startsWith('done ')).map((l) => l.split(' ')[2]));
    expect(done).toHaveLength(500);
    expect(new Set(done).size).toBe(500);
    const [rows] = await t.q<{ done: number; other: number }>(
      `SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status <> 'done')::int AS other
         FROM stepd.workflow_steps WHERE name = 'charge'`,
    );
    expect(rows).toEqual({ done: 500, other: 0 });
    // The pooler really was in between, in transaction mode, with at most two server connections.
    const pool = (await show('POOLS')).find((p) => p.database === database && p.user === role);
    expect(pool).toMatchObject({ pool_mode: 'transaction' });
    expect(Number(pool!.sv_active) + Number(pool!.sv_idle) + Number(pool!.sv_used)).toBeLessThanOrEqual(2);
    const stats = (await show('STATS')).find((s) => s.database === database);
    expect(Number(stats!.total_xact_count)).toBeGreaterThan(500);
  }, 240_000);
});
