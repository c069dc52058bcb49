/**
 * Rows (a new workflow to admit, a redrive request) whose transaction met a row lock held by
 * another transaction past its short lock wait: the lane skips each for a backoff (100 ms,
 * doubling, at most MAX_DEFER_MS) and tries it again, so a lock a client holds open delays only
 * the work that needs that lock (admissionLocks.ts, redrive.ts), never the lane.
 */

const FIRST_DEFER_MS = 100;
const MAX_DEFER_MS = 2_000;
/** An entry this long past its retry is forgotten (the row was handled, cancelled or deleted). */
const FORGET_AFTER_MS = 60_000;

/** The deferred rows of one executor's lane (it skips them until their retry). */
export class LockDeferrals {
  private readonly byId = new Map<string, { until: number; tries: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Defers `id` (its backoff doubles with each deferral); returns the delay in ms. */
  defer(id: string): number {
    const tries = (this.byId.get(id)?.tries ?? 0) + 1;
    const ms = Math.min(MAX_DEFER_MS, FIRST_DEFER_MS * 2 ** Math.min(tries - 1, 16));
    this.byId.set(id, { until: this.now() + ms, tries });
    return ms;
  }

  /** Ids the lane leaves out now; forgets entries long past their retry. */
  skipped(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [id, e] of this.byId) {
      if (e.until > now) out.push(id);
      else if (now - e.until > FORGET_AFTER_MS) this.byId.delete(id);
    }
    return out;
  }

  /** Milliseconds until the soonest deferred row may be tried again (undefined: none waits). */
  nextInMs(): number | undefined {
    const now = this.now();
    let soonest: number | undefined;
    for (const e of this.byId.values()) if (e.until > now) soonest = Math.min(soonest ?? Infinity, e.until - now);
    return soonest;
  }
}
