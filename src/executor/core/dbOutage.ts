/**
 * Whether the database is reachable, as the executor's parts find out: the claim loop, the
 * outcome queue, the heartbeat, the watchdog and the listener all report here. An outage is
 * logged once when it starts (warn) and once when it ends (info, with its duration) — not once
 * per failed attempt. Errors that are not about the connection are not an outage; the caller
 * logs those itself.
 */
import { isConnectionError } from '../../db/connect.js';
import type { Logger } from '../../logger.js';

export class DatabaseOutage {
  private since: number | undefined;
  private failures = 0;

  constructor(
    private readonly opts: {
      log: Logger;
      /** Called once when an outage ends (reconcile what was ambiguous, wake the loop). */
      onRecovered?: (downMs: number) => void;
      now?: () => number;
    },
  ) {}

  get active(): boolean {
    return this.since !== undefined;
  }

  /**
   * Reports a failure. Returns true when it was a connection error (now part of an outage and
   * already logged), false when the caller must log it itself.
   */
  failed(err: unknown, where: string): boolean {
    if (!isConnectionError(err)) return false;
    this.failures++;
    if (this.since === undefined) {
      this.since = this.now();
      this.opts.log.warn({ err, where }, 'database unreachable');
    } else {
      this.opts.log.debug({ where, message: (err as Error).message, failures: this.failures }, 'database still unreachable');
    }
    return true;
  }

  /** Reports that a statement went through: ends the outage, if there was one. */
  succeeded(): void {
    if (this.since === undefined) return;
    const downMs = this.now() - this.since;
    this.opts.log.info({ downMs, failedAttempts: this.failures }, 'database reachable again');
    this.since = undefined;
    this.failures = 0;
    this.opts.onRecovered?.(downMs);
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }
}

/** Backoff for retries against the database: 100 ms doubling to `maxMs`, with ±20 % jitter. */
export function backoffMs(attempt: number, maxMs = 5_000, random: () => number = Math.random): number {
  const base = Math.min(maxMs, 100 * 2 ** Math.min(Math.max(attempt - 1, 0), 16));
  return Math.round(base * (0.8 + 0.4 * random()));
}
