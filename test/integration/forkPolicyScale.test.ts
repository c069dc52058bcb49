/**
 * Fork policies at scale and under contention: a forEach of 1,000 items that joins after ten and
 * cancels the rest in one transaction; fan-outs nested in items; and two executors settling 200
 * forks whose branches all end at the same instant, never creating a join twice.
 */
import { describe, expect, it } from 'vitest';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForWorkflow } from '../helpers/db.js';

/** `maybe.wait`: answers at once when its args say `fast`, else waits until aborted. */
function maybeTools() {
  let aborted = 0;
  const provider: ToolProvider = {
    prefix: 'maybe',
    call: (_tool, args, ctx) =>
      (args as { fast?: boolean }).fast
        ? Promise.resolve(args)
        : new Promise((_resolve, reject) => {
            ctx.signal.addEventListener('abort', () => {
              aborted++;
              reject(new Error('aborted'));
            }, { once: true });
          }),
    list: async () => [{ name: 'wait' }],
  };
  return { provider, aborted: () => aborted };
}

describe('forEach of 1,000 items with complete: {atLeast: 10}', () => {
  it('joins after the ten fast items and cancels the other 990 in one transaction', async () => {
    const t = await createTestSchema();
    const maybe = maybeTools();
    // Slots for every item: the fast ones are spread through the list, behind stuck ones.
    await startExecutor(t, { tools: [maybe.provider], concurrency: 1000 });
    const items = Array.from({ length: 1000 }, (_, i) => ({ i, fast: i % 100 === 7 }));
    const id = await insertWorkflow(t, {
      start: 'each',
      maxSteps: 1100,
      steps: {
        each: { forEach: { items: '{{input.items}}', step: 'work' }, complete: { atLeast: 10 }, join: 'enough' },
        work: { tool: 'maybe.wait', args: '{{item}}' },
        enough: { tool: 'core.echo', args: { completed: '{{completed}}', results: '{{results}}' } },
      },
    }, { items });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const out = wf.output as { completed: number; results: unknown[] };
    expect(out.completed).toBe(10);
    expect(out.results).toHaveLength(1000);
    expect(out.results.filter((r) => r !== null)).toEqual(items.filter((x) => x.fast));
    const cancelled = await t.q<{ n: number; stamps: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT updated_at)::int AS stamps FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'cancelled'`,
      [id],
    );
    expect(cancelled[0]).toEqual({ n: 990, stamps: 1 });
    expect((await getSteps(t, id)).filter((s) => s.name === 'enough')).toHaveLength(1);
  });
});

describe('fan-outs nested in forEach items', () => {
  it('races two branches per item with complete: first; each item joins once, the outer join after every item', async () => {
    const t = await createTestSchema();
    const maybe = maybeTools();
    await startExecutor(t, { tools: [maybe.provider] });
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: [1, 2, 3], step: 'race' }, join: 'all' },
        race: { parallel: ['quick', 'stuck'], complete: 'first', join: 'won' },
        quick: { tool: 'maybe.wait', args: { fast: true, item: '{{item}}' } },
        stuck: { tool: 'maybe.wait', args: { item: '{{item}}' } },
        won: { tool: 'core.echo', args: { item: '{{item}}', by: '{{results.quick.item}}' } },
        all: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: [1, 2, 3].map((i) => ({ item: i, by: i })) });
    const steps = await getSteps(t, id);
    expect(steps.filter((s) => s.name === 'won')).toHaveLength(3);
    expect(steps.filter((s) => s.name === 'stuck').every((s) => s.status === 'cancelled')).toBe(true);
    await waitFor(() => maybe.aborted() === 3 || undefined, 'the three stuck tools aborted');
  });
});

describe('two executors, simultaneous arrivals', () => {
  it('never creates a join twice: 200 forks whose branches end at the same instant', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await startExecutor(t);
    const at = new Date(Date.now() + 4_000).toISOString();
    const policies: unknown[] = ['all', 'first', { atLeast: 2 }, { when: 'completed >= 2' }];
    const ids: string[] = [];
    for (let k = 0; k < 200; k++) {
      const complete = policies[k % policies.length];
      ids.push(
        await insertWorkflow(t, {
          start: 'fork',
          steps: {
            fork: { parallel: ['a', 'b', 'c'], complete, ...(k % 8 >= 4 ? { cancelRemaining: false } : complete === 'all' ? {} : { cancelRemaining: true }), join: 'j' },
            a: { wait: { until: '{{input.at}}' } },
            b: { wait: { until: '{{input.at}}' } },
            c: { wait: { until: '{{input.at}}' } },
            j: { tool: 'core.echo', args: { c: '{{completed}}' } },
          },
        }, { at }),
      );
    }
    await waitFor(async () => {
      const rows = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'cancelled')`, [ids]);
      return rows[0]!.n === ids.length || undefined;
    }, 'all 200 workflows ended', 60_000);
    const statuses = await t.q<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM stepd.workflows WHERE id = ANY($1::bigint[]) GROUP BY status`, [ids]);
    expect(statuses).toEqual([{ status: 'completed', n: 200 }]);
    const joins = await t.q<{ workflow_id: string; n: number }>(
      `SELECT workflow_id, count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[]) AND name = 'j' GROUP BY workflow_id`,
      [ids],
    );
    expect(joins).toHaveLength(200);
    expect(joins.filter((j) => j.n !== 1)).toEqual([]);
  }, 90_000);
});
