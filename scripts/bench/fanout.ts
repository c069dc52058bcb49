/**
 * Scenario 3, fan-out: one workflow whose first step is a `forEach` over N items (each item a
 * `core.noop` step), then a join step. Total = the workflow's completed_at − created_at.
 */
import { MS_BETWEEN } from './pg.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface FanoutResult {
  items: number;
  totalMs: number;
  /** Items finished per second over the whole workflow. */
  itemsPerSec: number;
  timedOut: boolean;
}

export function fanoutFlow(items: number): unknown {
  return {
    start: 'fan',
    maxSteps: items + 10,
    steps: {
      fan: { forEach: { items: '{{input.items}}', step: 'item' }, join: 'collect' },
      item: { tool: 'core.noop' },
      collect: { tool: 'core.noop', done: true },
    },
  };
}

export async function runFanout(ctx: StepdContext, items: number, name = 'bench-fanout'): Promise<FanoutResult> {
  const { workflows, steps } = tables(ctx.schema);
  const input = { items: Array.from({ length: items }, (_, i) => i) };
  const { first: id } = await insertWorkflows(ctx, name, fanoutFlow(items), 1, input);
  const { timedOut } = await waitForWorkflows(ctx, name);
  const [r] = await query<{ total_ms: number; done_items: number }>(
    ctx,
    `SELECT ${MS_BETWEEN('w.created_at', 'coalesce(w.completed_at, clock_timestamp())')} AS total_ms,
            (SELECT count(*)::int FROM ${steps} s WHERE s.workflow_id = w.id AND s.name = 'item' AND s.status = 'done') AS done_items
       FROM ${workflows} w WHERE w.id = $1`,
    [id],
  );
  return { items: r!.done_items, totalMs: r!.total_ms, itemsPerSec: (r!.done_items / r!.total_ms) * 1000, timedOut };
}
