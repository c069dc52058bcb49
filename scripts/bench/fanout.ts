/**
 * Scenario 3, fan-out: one workflow whose first step is a `forEach` over N items (each item a
 * `core.noop` step), then a join step. Total = the workflow's completed_at − created_at.
 * With `complete: 'first'` (scenario 3b) the join runs after the first item and cancels the rest.
 */
import { MS_BETWEEN } from './pg.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface FanoutResult {
  items: number;
  totalMs: number;
  /** Items finished per second over the whole workflow. */
  itemsPerSec: number;
  /**
   * Where the time went, from the item rows (database clock; now() is per transaction, so each
   * distinct timestamp is one transaction): the transactions that created, started (claimed)
   * and completed the items, the span over which they were started, and the join's delay.
   */
  phases?: {
    createTxs: number;
    startTxs: number;
    completeTxs: number;
    /** Workflow created → first item created. */
    forkMs: number;
    /** First → last item started. */
    startSpanMs: number;
    /** First → last item completed. */
    completeSpanMs: number;
    /** Last item completed → join step created. */
    joinDelayMs: number;
  };
  timedOut: boolean;
}

export function fanoutFlow(items: number, complete?: 'first'): unknown {
  return {
    start: 'fan',
    maxSteps: items + 10,
    steps: {
      fan: { forEach: { items: '{{input.items}}', step: 'item' }, join: 'collect', ...(complete ? { complete } : {}) },
      item: { tool: 'core.noop' },
      collect: { tool: 'core.noop', done: true },
    },
  };
}

export async function runFanout(ctx: StepdContext, items: number, name = 'bench-fanout', complete?: 'first'): Promise<FanoutResult> {
  const { workflows, steps } = tables(ctx.schema);
  const input = { items: Array.from({ length: items }, (_, i) => i) };
  const { first: id } = await insertWorkflows(ctx, name, fanoutFlow(items, complete), 1, input);
  const { timedOut } = await waitForWorkflows(ctx, name);
  const [r] = await query<{ total_ms: number; done_items: number }>(
    ctx,
    `SELECT ${MS_BETWEEN('w.created_at', 'coalesce(w.completed_at, clock_timestamp())')} AS total_ms,
            (SELECT count(*)::int FROM ${steps} s WHERE s.workflow_id = w.id AND s.name = 'item' AND s.status = 'done') AS done_items
       FROM ${workflows} w WHERE w.id = $1`,
    [id],
  );
  const [p] = await query<{ create_txs: number; start_txs: number; complete_txs: number; fork_ms: number; start_span_ms: number; complete_span_ms: number; join_delay_ms: number }>(
    ctx,
    `SELECT count(DISTINCT i.created_at)::int AS create_txs, count(DISTINCT i.started_at)::int AS start_txs,
            count(DISTINCT i.completed_at)::int AS complete_txs,
            ${MS_BETWEEN('(SELECT created_at FROM ' + workflows + ' WHERE id = $1)', 'min(i.created_at)')} AS fork_ms,
            ${MS_BETWEEN('min(i.started_at)', 'max(i.started_at)')} AS start_span_ms,
            ${MS_BETWEEN('min(i.completed_at)', 'max(i.completed_at)')} AS complete_span_ms,
            ${MS_BETWEEN('max(i.completed_at)', "(SELECT min(created_at) FROM " + steps + " WHERE workflow_id = $1 AND name = 'collect')")} AS join_delay_ms
       FROM ${steps} i WHERE i.workflow_id = $1 AND i.name = 'item'`,
    [id],
  );
  return {
    items: r!.done_items,
    totalMs: r!.total_ms,
    itemsPerSec: (r!.done_items / r!.total_ms) * 1000,
    ...(p ? {
      phases: {
        createTxs: p.create_txs, startTxs: p.start_txs, completeTxs: p.complete_txs, forkMs: p.fork_ms,
        startSpanMs: p.start_span_ms, completeSpanMs: p.complete_span_ms, joinDelayMs: p.join_delay_ms,
      },
    } : {}),
    timedOut,
  };
}
