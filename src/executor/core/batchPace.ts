/**
 * The size of the next batch of a lane that commits many items in one transaction (outcomes,
 * admissions), so that a transaction takes about its target time at most: items that are cheap
 * (the outcome of a one-step workflow) still go hundreds to a commit, heavy ones (a node of a
 * sub-workflow tree starting 31 children) one or a few, and whatever waits behind the batch in
 * progress (another role's outcome or new workflow) waits no longer than about the target.
 *
 * A batch that ran past the target scales the next one down in proportion; a full batch that
 * stayed within it lets the next one double, up to the lane's maximum. So batches stay whole as
 * long as they are quick (the usual case costs nothing), shrink at once when items turn heavy,
 * and grow back within a few batches. One per lane, never shared.
 */
export class BatchPace {
  private limit: number;

  constructor(
    private readonly maxBatch: number,
    private readonly targetMs: number,
  ) {
    this.limit = maxBatch;
  }

  /** Told how long a batch of `n` items took. */
  recorded(n: number, ms: number): void {
    if (n <= 0) return;
    if (ms > this.targetMs) this.limit = Math.max(1, Math.floor((n * this.targetMs) / ms));
    else if (n >= this.limit) this.limit = Math.min(this.maxBatch, this.limit * 2);
  }

  /** How many items the next batch takes (at least one, at most the lane's maximum). */
  size(): number {
    return this.limit;
  }
}
