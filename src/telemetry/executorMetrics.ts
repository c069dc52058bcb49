/**
 * What the executor reports to metrics, as a small interface it is given (ExecutorDeps.metrics).
 * NO_METRICS does nothing: an executor built without metrics (tests, `stepd run`) pays nothing.
 * The Prometheus implementation is PromMetrics (src/telemetry/promMetrics.ts).
 */
import type { StepUsage } from '../usage/stepUsage.js';

/** How a step attempt ended, as a bounded label: `done`, or why it did not. */
export type StepResultLabel = 'done' | 'failed' | 'timeout' | 'cancelled';

export interface ExecutorMetrics {
  /** A claim statement (or transaction) ran: how long it took and how many steps it claimed. */
  claimed(seconds: number, rows: number): void;
  /** A batch of outcomes was recorded in one transaction: how long it took, how many outcomes. */
  outcomesRecorded(seconds: number, count: number): void;
  /** A step task started on this executor (`tool` null: a gate, timer or pass step); attempt > 1 counts as a retry. */
  stepStarted(tool: string | null, attempt: number): void;
  /** A step task ended; `result` undefined when it produced no outcome (handed back, or a sub-workflow step waiting). */
  stepEnded(tool: string | null, seconds: number, result: StepResultLabel | undefined): void;
  /** The watchdog rescued running steps: of executors that stopped heartbeating, or whose lease ran out. */
  rescued(reason: 'executor_dead' | 'lease_expired', count: number): void;
  /** A step attempt reported usage (tokens, cost), run as `user`. Optional: absent, usage is not counted. */
  usage?(user: string | null, usage: StepUsage): void;
  /** A capacity claim left steps ready: this many for a full key, this many for a rate token (claimGated.ts). */
  capacityWaits?(keyBlocked: number, throttled: number): void;
}

export const NO_METRICS: ExecutorMetrics = Object.freeze({
  claimed: () => {},
  outcomesRecorded: () => {},
  stepStarted: () => {},
  stepEnded: () => {},
  rescued: () => {},
});

/** The result label of an outcome: a failure's `timeout` and `cancelled` codes are told apart. */
export function stepResultLabel(outcome: { status: 'done' } | { status: 'failed'; error: { code?: string } }): StepResultLabel {
  if (outcome.status === 'done') return 'done';
  if (outcome.error.code === 'timeout') return 'timeout';
  if (outcome.error.code === 'cancelled') return 'cancelled';
  return 'failed';
}
