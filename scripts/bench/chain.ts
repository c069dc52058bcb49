/**
 * Scenario 2, chain: one workflow of N sequential `core.noop` steps (s0 → s1 → … → sN-1).
 * Timestamps come from the step rows (database clock):
 *   hop     = completed_at(i+1) − completed_at(i): one whole cycle of the chain (finish step i,
 *             create and claim step i+1, run it, finish it); its mean is the total / N;
 *   handoff = started_at(i+1) − completed_at(i): from step i's completion to step i+1 running.
 *   total   = the workflow's completed_at − created_at.
 */
import { MS_BETWEEN } from './pg.js';
import { summarize, type LatencySummary } from './stats.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface ChainResult {
  steps: number;
  totalMs: number;
  hopMs: LatencySummary;
  handoffMs: LatencySummary;
  timedOut: boolean;
}

export function chainFlow(length: number): unknown {
  const steps: Record<string, unknown> = {};
  for (let i = 0; i < length; i++) {
    steps[`s${i}`] = i + 1 < length ? { tool: 'core.noop', next: `s${i + 1}` } : { tool: 'core.noop', done: true };
  }
  return { start: 's0', maxSteps: length + 10, steps };
}

export async function runChain(ctx: StepdContext, length: number, name = 'bench-chain'): Promise<ChainResult> {
  const { workflows, steps } = tables(ctx.schema);
  const { first: id } = await insertWorkflows(ctx, name, chainFlow(length), 1);
  const { timedOut } = await waitForWorkflows(ctx, name);
  const hops = await query<{ hop_ms: number | null; handoff_ms: number | null }>(
    ctx,
    `SELECT ${MS_BETWEEN('lag(completed_at) OVER w', 'completed_at')} AS hop_ms,
            ${MS_BETWEEN('lag(completed_at) OVER w', 'started_at')} AS handoff_ms
       FROM ${steps} WHERE workflow_id = $1 AND status = 'done'
     WINDOW w AS (ORDER BY id)`,
    [id],
  );
  const [wf] = await query<{ total_ms: number | null }>(
    ctx,
    `SELECT ${MS_BETWEEN('created_at', 'coalesce(completed_at, clock_timestamp())')} AS total_ms FROM ${workflows} WHERE id = $1`,
    [id],
  );
  const hop = hops.map((h) => h.hop_ms).filter((v): v is number => v !== null);
  const handoff = hops.map((h) => h.handoff_ms).filter((v): v is number => v !== null);
  return { steps: hops.length, totalMs: wf!.total_ms!, hopMs: summarize(hop), handoffMs: summarize(handoff), timedOut };
}
