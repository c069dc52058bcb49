/** The executor's settings and their defaults (the defaults a user gets are the fast ones). */

export interface ExecutorOptions {
  databaseUrl: string;
  schema: string;
  executorId: string;
  /** Steps run at once by this executor. */
  concurrency: number;
  /** Fallback poll when no wake-up arrives. */
  pollIntervalMs: number;
  watchdogIntervalMs: number;
  /** Added to a step's timeout to make its lease. */
  leaseGraceMs: number;
  /** How long a graceful stop waits for running steps before aborting them. */
  shutdownGraceMs: number;
  /** New workflows admitted per transaction. */
  admitBatch: number;
  emitEvents: boolean;
  poolSize?: number;
  /** How often this executor marks itself alive in the `executors` table. */
  heartbeatIntervalMs: number;
  /** Without a beat for this long, an executor counts as dead and its running steps are rescued. */
  deadAfterMs: number;
}

export const DEFAULT_EXECUTOR_OPTIONS = {
  concurrency: 256,
  pollIntervalMs: 1_000,
  watchdogIntervalMs: 2_000,
  leaseGraceMs: 30_000,
  shutdownGraceMs: 30_000,
  admitBatch: 500,
  emitEvents: true,
  heartbeatIntervalMs: 2_000,
  deadAfterMs: 15_000,
} as const;
