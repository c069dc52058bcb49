/**
 * Scenario 1, throughput: N single-step workflows (`core.noop`) inserted with one INSERT.
 * Measured on the database clock: from the insert (the workflows' created_at, the INSERT's
 * transaction time) to the last workflow's completed_at.
 */
import { MS_BETWEEN } from './pg.js';
import { THROUGHPUT_WARMUP } from './settings.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface ThroughputResult {
  workflows: number;
  steps: number;
  elapsedMs: number;
  workflowsPerSec: number;
  stepsPerSec: number;
  /**
   * How the executor grouped the work, from the rows' timestamps (now() is per transaction, so
   * each distinct value is one transaction): steps per claiming transaction (started_at), per
   * completing transaction (completed_at), workflows per admitting transaction (started_at).
   */
  batching: { stepsPerClaim: number; stepsPerCompletion: number; workflowsPerAdmission: number };
  /** The scenario hit its time limit; the rates cover what finished until then. */
  timedOut: boolean;
}

export const NOOP_FLOW = { start: 'noop', steps: { noop: { tool: 'core.noop', done: true } } };

/**
 * Scenario 1's warm-up, outside its measurement: min(THROUGHPUT_WARMUP, count) workflows of the
 * same one-step flow, run to the end, as pg-boss gets the same number of no-op jobs (pgboss.ts).
 */
export async function warmUpThroughput(ctx: StepdContext, count: number): Promise<void> {
  const n = Math.min(THROUGHPUT_WARMUP, count);
  await insertWorkflows(ctx, 'bench-throughput-warmup', NOOP_FLOW, n);
  const { timedOut } = await waitForWorkflows(ctx, 'bench-throughput-warmup');
  if (timedOut) throw new Error(`the executor did not finish ${n} warm-up workflows within ${ctx.timeoutMs} ms; its log:\n${ctx.executor.logTail.join('\n')}`);
}

export async function runThroughput(ctx: StepdContext, count: number, name = 'bench-throughput'): Promise<ThroughputResult> {
  const { workflows, steps } = tables(ctx.schema);
  const ids = await insertWorkflows(ctx, name, NOOP_FLOW, count);
  const { timedOut } = await waitForWorkflows(ctx, name);
  const [r] = await query<{ workflows: number; steps: number; elapsed_ms: number }>(
    ctx,
    `SELECT count(*) FILTER (WHERE w.status = 'completed')::int AS workflows,
            (SELECT count(*)::int FROM ${steps} s WHERE s.workflow_id BETWEEN $1 AND $2 AND s.status = 'done') AS steps,
            ${MS_BETWEEN('min(w.created_at)', "max(w.completed_at) FILTER (WHERE w.status = 'completed')")} AS elapsed_ms
       FROM ${workflows} w WHERE w.id BETWEEN $1 AND $2`,
    [ids.first, ids.last],
  );
  const [b] = await query<{ claims: number; completions: number; admissions: number; steps: number; workflows: number }>(
    ctx,
    `SELECT (SELECT count(DISTINCT started_at)::int FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2) AS claims,
            (SELECT count(DISTINCT completed_at)::int FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2) AS completions,
            (SELECT count(*)::int FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2 AND started_at IS NOT NULL) AS steps,
            count(DISTINCT started_at)::int AS admissions, count(started_at)::int AS workflows
       FROM ${workflows} WHERE id BETWEEN $1 AND $2`,
    [ids.first, ids.last],
  );
  const elapsedMs = r!.elapsed_ms;
  return {
    batching: {
      stepsPerClaim: b!.steps / Math.max(1, b!.claims),
      stepsPerCompletion: b!.steps / Math.max(1, b!.completions),
      workflowsPerAdmission: b!.workflows / Math.max(1, b!.admissions),
    },
    workflows: r!.workflows,
    steps: r!.steps,
    elapsedMs,
    workflowsPerSec: (r!.workflows / elapsedMs) * 1000,
    stepsPerSec: (r!.steps / elapsedMs) * 1000,
    timedOut,
  };
}
