/**
 * Ready steps that a claim may have skipped. The claim takes rows `FOR UPDATE SKIP LOCKED`, so a
 * row readied by a client and, at that moment, locked by someone else — another client whose
 * no-op `UPDATE … WHERE status = 'pending'` is waiting for or re-checking the row, a service that
 * reads it `FOR UPDATE` — is skipped; its wake-up has been spent, and without a second look it
 * waits for the next poll (a second by default). Measured with four clients racing to ready the
 * same gates: most are taken at once, a few waited the whole poll interval.
 *
 * So: the readyings announced since the last claim are counted (a wake-up is only a hint, so
 * this is a count, never a list of ids); when a claim takes fewer rows than were announced, the
 * loop looks again shortly, backing off while the shortfall lasts and stopping at the poll
 * interval. A hint answered by another executor costs at most those few empty claims. Pure
 * bookkeeping, no I/O; one per executor.
 */
export const FIRST_RECHECK_MS = 5;

export class SkippedReadyRecheck {
  private announced = 0;
  private unanswered = 0;
  private delayMs = FIRST_RECHECK_MS;

  constructor(private readonly pollIntervalMs: number) {}

  /** A wake-up said a step was readied. */
  noteReadied(): void {
    this.announced++;
  }

  /**
   * Called with the rows a claim took, when it did not fill what it asked for (so it saw every
   * ready row it could lock). Returns when to look again (ms), or undefined when nothing
   * announced is missing.
   */
  afterClaim(claimed: number): number | undefined {
    this.unanswered = Math.max(0, this.unanswered + this.announced - claimed);
    this.announced = 0;
    if (this.unanswered === 0) {
      this.delayMs = FIRST_RECHECK_MS;
      return undefined;
    }
    const delay = this.delayMs;
    if (delay >= this.pollIntervalMs) {
      // The poll looks from here; forget what is missing (it may belong to another executor).
      this.unanswered = 0;
      this.delayMs = FIRST_RECHECK_MS;
      return undefined;
    }
    this.delayMs *= 2;
    return delay;
  }
}
