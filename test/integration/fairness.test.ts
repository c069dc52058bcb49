/**
 * Fair admission and claims: a workflow with thousands of ready steps never holds back a new
 * one-step workflow. Measured in rows, not milliseconds: how many of the big workflow's items
 * finished between the small one's insert and its completion.
 */
import { describe, expect, it } from 'vitest';
import type { LimitsConfig } from '../../src/configFile.js';
import { createLimitPolicy } from '../../src/tools/limits.js';
import { createTestSchema, getWorkflow, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const ITEMS = 2000;

const bigFlow = (concurrency: number) => ({
  maxSteps: ITEMS + 10,
  start: 'each',
  steps: {
    each: { forEach: { items: '{{input.items}}', step: 'item', concurrency }, join: 'end' },
    item: { tool: 'core.sleep', args: { ms: 5 } },
    end: { tool: 'core.noop', args: {} },
  },
});

async function itemsDone(t: TestSchema, workflowId: string): Promise<number> {
  const [row] = await t.q<{ n: number }>(
    `SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'item' AND status = 'done'`,
    [workflowId],
  );
  return row!.n;
}

describe('fairness', () => {
  it.each<[string, number, LimitsConfig | undefined]>([
    ['a thousand items ready at once', 1000, undefined],
    ['items ready a window at a time', 100, undefined],
    ['a thousand items ready at once, claims under limits', 1000, { defaultUser: 1000 }],
  ])('completes a new one-step workflow while a forEach of thousands runs (%s)', async (_label, concurrency, limits) => {
    const t = await createTestSchema();
    await startExecutor(t, { concurrency: 16, ...(limits ? { limits: createLimitPolicy(limits) } : {}) });
    const big = await insertWorkflow(t, bigFlow(concurrency), { items: Array.from({ length: ITEMS }, (_, i) => i) }, { user: 'bulk' });
    // The big one is running and has a backlog of ready items.
    await waitFor(async () => (await itemsDone(t, big)) >= 50, 'the big workflow to be under way');

    const before = await itemsDone(t, big);
    const small = await insertWorkflow(t, { start: 'one', steps: { one: { tool: 'core.echo', args: { hi: 'there' } } } }, {}, { user: 'someone' });
    const done = await waitForWorkflow(t, small, undefined, 60_000);
    const during = (await itemsDone(t, big)) - before;

    expect(done).toMatchObject({ status: 'completed', output: { hi: 'there' } });
    // Some claim cycles of the big one at most (16 slots each), far from draining its backlog: on a
    // quiet machine well under a tenth of the items; on a loaded 2-core CI machine 240–320 were seen
    // (at d831ab4 too), so the bound is a quarter. An unfair claim order drains nearly all of them.
    expect(during).toBeLessThan(ITEMS * 0.25);
    expect((await getWorkflow(t, big)).status).toBe('running');
    expect((await waitForWorkflow(t, big, undefined, 120_000)).status).toBe('completed');
  });
});
