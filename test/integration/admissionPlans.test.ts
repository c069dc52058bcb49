/**
 * The admission transaction plans its statements once per connection (a generic plan), not at
 * every batch: a custom plan of the admission statement costs ~1.5 ms of the server's CPU per
 * batch and comes out the same (docs/performance.md). Read from pg_prepared_statements of the
 * one connection the admissions ran on.
 */
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { resolveCaps } from '../../src/flow/caps.js';
import { silentLogger } from '../../src/logger.js';
import { admitWorkflows } from '../../src/executor/admission/admission.js';
import type { TxDeps } from '../../src/executor/outcomes/transactions.js';
import { WorkflowCache } from '../../src/executor/core/workflowCache.js';
import { createTestSchema, insertWorkflow, onCleanup } from '../helpers/db.js';

describe('the admission transaction', () => {
  it('runs its statements on generic plans, and admits as before', async () => {
    const t = await createTestSchema();
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
    onCleanup(() => pool.end());
    const deps: TxDeps = {
      pool,
      cache: new WorkflowCache(undefined, resolveCaps(undefined)),
      executorId: 'plans',
      schema: t.schema,
      log: silentLogger(),
      random: () => 0,
      emitEvents: true,
      leaseGraceMs: 1_000,
    };
    const flow = { start: 'a', steps: { a: { tool: 'core.noop', done: true } } };
    for (let i = 0; i < 24; i++) await insertWorkflow(t, flow, {}, { user: i % 2 ? 'ann' : 'bob' });
    let admitted = 0;
    for (let i = 0; i < 8; i++) admitted += (await admitWorkflows(deps, 3)).admitted;
    expect(admitted).toBe(24);
    const plans = await pool.query<{ name: string; generic_plans: string; custom_plans: string }>(
      `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE name IN ('stepd_admit_new_workflows', 'stepd_insert_steps')`,
    );
    expect(plans.rows).toHaveLength(2);
    for (const p of plans.rows) {
      expect(Number(p.custom_plans), p.name).toBe(0);
      expect(Number(p.generic_plans), p.name).toBeGreaterThanOrEqual(8);
    }
    const steps = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE status = 'ready'`);
    expect(steps[0]!.n).toBe(24);
  });
});
