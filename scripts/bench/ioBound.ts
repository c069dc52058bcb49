/**
 * Scenario 6, I/O-bound workflows: N workflows of three sequential steps, each a `core.sleep`
 * of `sleepMs` (a tool that waits, like an HTTP or model call), inserted with one INSERT and run
 * by an executor with a known concurrency C. A perfect executor keeps all C slots waiting all
 * the time: ideal = C ÷ sleepMs steps/s. The share of it is what the pipeline costs between
 * one wait and the next (claiming, recording, creating the next step, admitting workflows).
 *
 * Also from the step rows (database clock): slot occupancy = Σ(completed_at − started_at) ÷
 * (elapsed × C) — how full the slots looked from the database, the recording latency counted
 * as occupied — and the step's run time p50/p99, whose excess over sleepMs is the time from the
 * tool's return to its outcome's commit.
 */
import { MS_BETWEEN } from './pg.js';
import { summarize, type LatencySummary } from './stats.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface IoBoundResult {
  workflows: number;
  steps: number;
  concurrency: number;
  sleepMs: number;
  elapsedMs: number;
  stepsPerSec: number;
  idealStepsPerSec: number;
  /** stepsPerSec ÷ idealStepsPerSec, 0..1. */
  shareOfIdeal: number;
  /** Σ step run time ÷ (elapsed × concurrency), 0..1. */
  slotOccupancy: number;
  /** completed_at − started_at of the steps. */
  stepRunMs: LatencySummary;
  timedOut: boolean;
}

export function ioFlow(sleepMs: number): unknown {
  const step = (next?: string) => ({ tool: 'core.sleep', args: { ms: sleepMs }, ...(next ? { next } : { done: true }) });
  return { start: 'a', steps: { a: step('b'), b: step('c'), c: step() } };
}

export async function runIoBound(ctx: StepdContext, opts: { workflows: number; concurrency: number; sleepMs: number }, name = 'bench-io'): Promise<IoBoundResult> {
  const { workflows, steps } = tables(ctx.schema);
  const ids = await insertWorkflows(ctx, name, ioFlow(opts.sleepMs), opts.workflows);
  const { timedOut } = await waitForWorkflows(ctx, name);
  const [r] = await query<{ workflows: number; elapsed_ms: number }>(
    ctx,
    `SELECT count(*) FILTER (WHERE status = 'completed')::int AS workflows,
            ${MS_BETWEEN('min(created_at)', "max(completed_at) FILTER (WHERE status = 'completed')")} AS elapsed_ms
       FROM ${workflows} WHERE id BETWEEN $1 AND $2`,
    [ids.first, ids.last],
  );
  const runs = await query<{ ms: number }>(
    ctx,
    `SELECT ${MS_BETWEEN('started_at', 'completed_at')} AS ms FROM ${steps}
      WHERE workflow_id BETWEEN $1 AND $2 AND status = 'done'`,
    [ids.first, ids.last],
  );
  const elapsedMs = r!.elapsed_ms;
  const stepsDone = runs.length;
  const stepsPerSec = (stepsDone / elapsedMs) * 1000;
  const idealStepsPerSec = opts.concurrency / (opts.sleepMs / 1000);
  const busyMs = runs.reduce((s, x) => s + x.ms, 0);
  return {
    workflows: r!.workflows,
    steps: stepsDone,
    concurrency: opts.concurrency,
    sleepMs: opts.sleepMs,
    elapsedMs,
    stepsPerSec,
    idealStepsPerSec,
    shareOfIdeal: stepsPerSec / idealStepsPerSec,
    slotOccupancy: busyMs / (elapsedMs * opts.concurrency),
    stepRunMs: summarize(runs.map((x) => x.ms)),
    timedOut,
  };
}
