/**
 * Workflows whose admission met a row lock held by another transaction (a client holding a
 * signal's bucket open, sql/0025, or any row the admission of that one workflow touches). An
 * admission transaction waits for a lock at most ADMISSION_LOCK_WAIT_MS; past it the batch is
 * redone without the workflow that met the lock, which stays `new` and is tried again after a
 * backoff (100 ms, doubling, at most MAX_DEFER_MS), as a shared outcome batch hands a held
 * workflow to the alone lane (outcomeLocks.ts). Nothing is created without its lock: the held
 * workflow is simply not admitted yet, so only workflows meeting that same lock wait.
 */

/** An admission transaction's lock wait (`lock_timeout`, set in its BEGIN). */
export const ADMISSION_LOCK_WAIT_MS = 200;

const FIRST_DEFER_MS = 100;
const MAX_DEFER_MS = 2_000;
/** An entry this long past its retry is forgotten (the workflow was admitted, cancelled or deleted). */
const FORGET_AFTER_MS = 60_000;

/** One workflow's admission met a row lock held elsewhere past ADMISSION_LOCK_WAIT_MS (55P03). */
export class AdmissionLockHeld extends Error {
  readonly code = 'admission_lock_held';
  readonly retryable = true;
  constructor(
    readonly workflowId: string,
    cause: unknown,
  ) {
    super(`admitting workflow ${workflowId} met a row lock held by another transaction for more than ${ADMISSION_LOCK_WAIT_MS} ms`, { cause });
  }
}

/** The deferred workflows of one executor (admission skips them until their retry). */
export class AdmissionDeferrals {
  private readonly byId = new Map<string, { until: number; tries: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Defers `id` (its backoff doubles with each deferral); returns the delay in ms. */
  defer(id: string): number {
    const tries = (this.byId.get(id)?.tries ?? 0) + 1;
    const ms = Math.min(MAX_DEFER_MS, FIRST_DEFER_MS * 2 ** Math.min(tries - 1, 16));
    this.byId.set(id, { until: this.now() + ms, tries });
    return ms;
  }

  /** Workflows admission leaves out now; forgets entries long past their retry. */
  skipped(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [id, e] of this.byId) {
      if (e.until > now) out.push(id);
      else if (now - e.until > FORGET_AFTER_MS) this.byId.delete(id);
    }
    return out;
  }

  /** Milliseconds until the soonest deferred workflow may be tried again (undefined: none waits). */
  nextInMs(): number | undefined {
    const now = this.now();
    let soonest: number | undefined;
    for (const e of this.byId.values()) if (e.until > now) soonest = Math.min(soonest ?? Infinity, e.until - now);
    return soonest;
  }
}
