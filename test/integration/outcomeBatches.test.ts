/**
 * The outcome batch on its own (src/executor/outcomes/outcomeBatch.ts): many outcomes of one workflow
 * recorded in one transaction, set-based, with the invariants of one-at-a-time recording —
 * a join created exactly once with its results in order, a forEach window moving by one item
 * per branch that ended, and nothing moving on below a fork that fails or after the workflow
 * ended in the same batch. Driven directly: admit, claim every ready step, finish them together.
 */
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { claimReadySteps } from '../../src/db/queries.js';
import { resolveCaps } from '../../src/flow/caps.js';
import { silentLogger } from '../../src/logger.js';
import { admitWorkflows } from '../../src/executor/admission/admission.js';
import { finishSteps, type FinishInput, type TxDeps } from '../../src/executor/outcomes/transactions.js';
import type { Outcome } from '../../src/executor/transitions/advance.js';
import { WorkflowCache } from '../../src/executor/core/workflowCache.js';
import { createTestSchema, getSteps, getWorkflow, insertWorkflow, onCleanup, type TestSchema } from '../helpers/db.js';

async function setUp(): Promise<{ t: TestSchema; deps: TxDeps }> {
  const t = await createTestSchema();
  const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 2 });
  onCleanup(() => pool.end());
  const deps: TxDeps = {
    pool,
    cache: new WorkflowCache(undefined, resolveCaps(undefined)),
    executorId: 'batch',
    schema: t.schema,
    log: silentLogger(),
    random: () => 0,
    emitEvents: false,
    leaseGraceMs: 1_000,
  };
  return { t, deps };
}

/** Claims every ready step and records all their outcomes in one batch (outcome by step name). */
async function finishAllReady(deps: TxDeps, outcome: (name: string, itemIndex: number | null) => Outcome): Promise<number> {
  const rows = await claimReadySteps(deps.pool, { executorId: 'batch', limit: 10_000, leaseMs: 60_000 });
  const inputs: FinishInput[] = rows.map((r) => ({ stepId: r.id, workflowId: r.workflow_id, guard: 'running', outcome: outcome(r.name, r.item_index) }));
  await finishSteps(deps, inputs);
  return rows.length;
}

const done = (result: unknown): Outcome => ({ status: 'done', result });
const failed = (code: string): Outcome => ({ status: 'failed', error: { code, message: code, retryable: false } });
const names = async (t: TestSchema, id: string, name: string) => (await getSteps(t, id)).filter((s) => s.name === name);

describe('an outcome batch', () => {
  it('settles every item of a forEach in one transaction and creates the join once, results in input order', async () => {
    const { t, deps } = await setUp();
    const items = Array.from({ length: 50 }, (_, i) => i);
    const id = await insertWorkflow(
      t,
      { start: 'fan', maxSteps: 100, steps: { fan: { forEach: { items: '{{input.items}}', step: 'item' }, join: 'collect' }, item: { tool: 'core.echo' }, collect: { tool: 'core.echo', args: { r: '{{results}}' } } } },
      { items },
    );
    await admitWorkflows(deps, 10);
    expect(await finishAllReady(deps, (_n, i) => done({ i }))).toBe(50);
    const join = await names(t, id, 'collect');
    expect(join).toHaveLength(1);
    expect(join[0]!.status).toBe('ready');
    expect(join[0]!.args).toEqual({ r: items.map((i) => ({ i })) });
    await finishAllReady(deps, () => done('ok'));
    expect((await getWorkflow(t, id)).status).toBe('completed');
    const fan = (await names(t, id, 'item')).map((s) => [s.item_index, s.status, s.result]);
    expect(fan).toEqual(items.map((i) => [i, 'done', { i }]));
  });

  it('moves a forEach window by one item per branch that ended in the batch', async () => {
    const { t, deps } = await setUp();
    const id = await insertWorkflow(
      t,
      { start: 'fan', steps: { fan: { forEach: { items: '{{input.items}}', step: 'item', concurrency: 2 }, join: 'collect' }, item: { tool: 'core.echo' }, collect: { tool: 'core.echo', args: { r: '{{results}}' } } } },
      { items: ['a', 'b', 'c', 'd', 'e'] },
    );
    await admitWorkflows(deps, 10);
    expect(await finishAllReady(deps, (_n, i) => done(i))).toBe(2);
    expect((await names(t, id, 'item')).map((s) => s.item_index)).toEqual([0, 1, 2, 3]);
    expect(await finishAllReady(deps, (_n, i) => done(i))).toBe(2);
    expect(await finishAllReady(deps, (_n, i) => done(i))).toBe(1);
    const join = await names(t, id, 'collect');
    expect(join).toHaveLength(1);
    expect(join[0]!.args).toEqual({ r: [0, 1, 2, 3, 4] });
  });

  it('creates the join of an allSettled fan-out once when a failure and successes settle together', async () => {
    const { t, deps } = await setUp();
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b', 'c'], mode: 'allSettled', join: 'merge' },
        a: { tool: 'core.echo' },
        b: { tool: 'core.echo' },
        c: { tool: 'core.echo' },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    await admitWorkflows(deps, 10);
    expect(await finishAllReady(deps, (n) => (n === 'b' ? failed('boom') : done(n)))).toBe(3);
    const join = await names(t, id, 'merge');
    expect(join).toHaveLength(1);
    expect(join[0]!.args).toMatchObject({ r: { a: { status: 'done', result: 'a' }, b: { status: 'failed' }, c: { status: 'done', result: 'c' } } });
  });

  it('moves nothing on below a failFast fork that fails in the same batch: outcomes not applied yet are cancelled', async () => {
    const { t, deps } = await setUp();
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        // "bad" is created first, so its failure is applied before the others' successes.
        fork: { parallel: ['bad', 'good'], join: 'merge', onError: 'handle' },
        bad: { tool: 'core.echo' },
        good: { tool: 'core.echo', next: 'good2' },
        good2: { tool: 'core.echo' },
        merge: { tool: 'core.echo' },
        handle: { tool: 'core.echo', args: { e: '{{error.code}}' } },
      },
    });
    await admitWorkflows(deps, 10);
    expect(await finishAllReady(deps, (n) => (n === 'bad' ? failed('boom') : done(n)))).toBe(2);
    const steps = await getSteps(t, id);
    const status = (name: string) => steps.filter((s) => s.name === name).map((s) => s.status);
    expect(status('fork')).toEqual(['failed']);
    expect(status('bad')).toEqual(['failed']);
    expect(status('good')).toEqual(['cancelled']);
    expect(status('good2')).toEqual([]);
    expect(status('merge')).toEqual([]);
    expect(status('handle')).toEqual(['ready']);
    expect(steps.find((s) => s.name === 'handle')!.args).toEqual({ e: 'boom' });
  });

  it('ends the workflow once when one branch ends it and another outcome of it comes in the same batch', async () => {
    const { t, deps } = await setUp();
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['stop', 'other'], join: 'merge' },
        stop: { tool: 'core.echo', done: true },
        other: { tool: 'core.echo', next: 'other2' },
        other2: { tool: 'core.echo' },
        merge: { tool: 'core.echo' },
      },
    });
    await admitWorkflows(deps, 10);
    expect(await finishAllReady(deps, (n) => done(n))).toBe(2);
    const wf = await getWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toBe('stop');
    const steps = await getSteps(t, id);
    expect(steps.filter((s) => s.name === 'other').map((s) => s.status)).toEqual(['cancelled']);
    expect(steps.filter((s) => ['other2', 'merge'].includes(s.name))).toEqual([]);
    expect(steps.filter((s) => ['pending', 'ready', 'running'].includes(s.status))).toEqual([]);
  });

  it('completes many one-step workflows in one batch, each once, with its own output', async () => {
    const { t, deps } = await setUp();
    const flow = { start: 'a', steps: { a: { tool: 'core.echo', done: true } } };
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await insertWorkflow(t, flow, { i }));
    await admitWorkflows(deps, 100);
    const rows = await claimReadySteps(deps.pool, { executorId: 'batch', limit: 100, leaseMs: 60_000 });
    const r = await finishSteps(
      deps,
      rows.map((row) => ({ stepId: row.id, workflowId: row.workflow_id, guard: 'running' as const, outcome: done({ wf: row.workflow_id }) })),
    );
    expect(r.recorded.size).toBe(20);
    for (const id of ids) {
      const wf = await getWorkflow(t, id);
      expect(wf.status).toBe('completed');
      expect(wf.output).toEqual({ wf: id });
    }
  });
});
