/**
 * Scenario 9, keyed concurrency: `keys` × `perKey` single-step workflows (`core.noop`), each step
 * under `"concurrency": { "key": "k-{{input.k}}", "limit": 1 }`, inserted with one INSERT, keys
 * interleaved (k = i mod keys). Every step goes through the capacity claim (capacity_verdicts):
 * at most one step of a key runs at once, 1,000 keys at a time. Measured on the database clock,
 * as scenario 1: from the insert to the last workflow's completed_at. Also checks the limit held
 * (no two steps of one key overlapped).
 */
import { MS_BETWEEN } from './pg.js';
import { query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface KeyedResult {
  keys: number;
  workflows: number;
  steps: number;
  elapsedMs: number;
  stepsPerSec: number;
  /** Pairs of steps of one key that ran at the same time (must be 0). */
  overlaps: number;
  timedOut: boolean;
}

export const KEYED_FLOW = {
  start: 'noop',
  steps: { noop: { tool: 'core.noop', concurrency: { key: 'k-{{input.k}}', limit: 1 }, done: true } },
};

export async function runKeyed(ctx: StepdContext, keys: number, perKey: number, name = 'bench-keyed'): Promise<KeyedResult> {
  const { workflows, steps } = tables(ctx.schema);
  const [ids] = await query<{ first: string; last: string }>(
    ctx,
    `WITH ins AS (INSERT INTO ${workflows} (name, flow, input, created_by)
                  SELECT $1, $2::jsonb, jsonb_build_object('k', g % $3::int), 'bench' FROM generate_series(1, $4::int) g RETURNING id)
     SELECT min(id)::text AS first, max(id)::text AS last FROM ins`,
    [name, JSON.stringify(KEYED_FLOW), keys, keys * perKey],
  );
  const { timedOut } = await waitForWorkflows(ctx, name);
  const [r] = await query<{ workflows: number; steps: number; elapsed_ms: number; overlaps: number }>(
    ctx,
    `SELECT count(*) FILTER (WHERE w.status = 'completed')::int AS workflows,
            (SELECT count(*)::int FROM ${steps} s WHERE s.workflow_id BETWEEN $1 AND $2 AND s.status = 'done') AS steps,
            ${MS_BETWEEN('min(w.created_at)', "max(w.completed_at) FILTER (WHERE w.status = 'completed')")} AS elapsed_ms,
            (SELECT count(*)::int FROM ${steps} a JOIN ${steps} b
                ON a.concurrency_key = b.concurrency_key AND a.id < b.id
               AND a.started_at < b.completed_at AND b.started_at < a.completed_at
             WHERE a.workflow_id BETWEEN $1 AND $2 AND b.workflow_id BETWEEN $1 AND $2) AS overlaps
       FROM ${workflows} w WHERE w.id BETWEEN $1 AND $2`,
    [ids!.first, ids!.last],
  );
  return {
    keys,
    workflows: r!.workflows,
    steps: r!.steps,
    elapsedMs: r!.elapsed_ms,
    stepsPerSec: (r!.steps / r!.elapsed_ms) * 1000,
    overlaps: r!.overlaps,
    timedOut,
  };
}
