/**
 * The worker contract through Debian's PgBouncer in transaction mode (a server connection is a
 * worker's for one transaction only): no call needs session state, so workers that poll (no
 * LISTEN) serve every task through a pool of two server connections, none lost, none done twice.
 * The docs' own workers through the pooler: docsWorkers.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, startExecutor } from '../helpers/db.js';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { runChargeBatch, startPgbouncer, startPythonWorker, workerRole } from './workerHelpers.js';

describe('workers through PgBouncer (transaction mode)', () => {
  it('3 polling workers share two server connections: 500 tasks, none lost, none done twice', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })], concurrency: 16 });
    const { role } = await workerRole(t);
    const database = new URL(t.url).pathname.slice(1);
    const { url, show } = await startPgbouncer(role, database);
    const workers = await Promise.all([0, 1, 2].map(() => startPythonWorker(t, url, { max: 10 })));
    await runChargeBatch(t, workers, 10, 50, 180_000);
    // The pooler really was in between, in transaction mode, with at most two server connections.
    const pool = (await show('POOLS')).find((p) => p.database === database && p.user === role);
    expect(pool).toMatchObject({ pool_mode: 'transaction' });
    expect(Number(pool!.sv_active) + Number(pool!.sv_idle) + Number(pool!.sv_used)).toBeLessThanOrEqual(2);
    const stats = (await show('STATS')).find((s) => s.database === database);
    expect(Number(stats!.total_xact_count)).toBeGreaterThan(500);
  }, 240_000);
});
