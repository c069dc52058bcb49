/**
 * Recording outcomes: a step's outcome advances its workflow once, however often it is handed in.
 */
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { claimReadySteps } from '../../src/db/queries.js';
import { resolveCaps } from '../../src/flow/caps.js';
import { silentLogger } from '../../src/logger.js';
import { admitWorkflows } from '../../src/executor/admission/admission.js';
import { finishSteps, type FinishInput, type TxDeps } from '../../src/executor/outcomes/transactions.js';
import { WorkflowCache } from '../../src/executor/core/workflowCache.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup } from '../helpers/db.js';

describe('recording outcomes', () => {
  it('advances a workflow once when the same outcome comes twice in one batch', async () => {
    const t = await createTestSchema();
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 2 });
    onCleanup(() => pool.end());
    const deps: TxDeps = {
      pool,
      cache: new WorkflowCache(undefined, resolveCaps(undefined)),
      executorId: 'rec',
      schema: t.schema,
      log: silentLogger(),
      random: () => 0,
      emitEvents: false,
      leaseGraceMs: 1_000,
    };
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', next: 'b' }, b: { tool: 'core.echo' } } });
    expect((await admitWorkflows(deps, 10)).admitted).toBe(1);
    const [a] = await claimReadySteps(pool, { executorId: 'rec', limit: 10, leaseMs: 60_000 });
    const input: FinishInput = { stepId: a!.id, workflowId: id, guard: 'running', outcome: { status: 'done', result: { ok: true } } };
    await finishSteps(deps, [input, { ...input }]);
    expect((await getSteps(t, id)).map((s) => [s.name, s.status])).toEqual([
      ['a', 'done'],
      ['b', 'ready'],
    ]);
  });
});
