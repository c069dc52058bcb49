/**
 * The executor's alarm for delayed starts: wakes admission when the earliest `start_at` of a new
 * workflow comes (src/db/queries/startAt.ts), so `stepd run --at` is punctual without a fast
 * poll. Only the earliest alarm is kept; a far one is re-checked after MAX_DELAY_MS (timers
 * cannot wait longer than ~24 days, and a cancelled workflow's alarm should not linger).
 */
const MAX_DELAY_MS = 3_600_000;

export class StartAtAlarm {
  private timer: NodeJS.Timeout | undefined;
  private at: number | undefined;
  private closed = false;

  constructor(private readonly onDue: () => void) {}

  /** Rings in `ms` (capped at an hour), unless an earlier alarm is set. */
  setIn(ms: number): void {
    if (this.closed) return;
    const delay = Math.max(0, Math.min(ms, MAX_DELAY_MS));
    const at = Date.now() + delay;
    if (this.at !== undefined && this.at <= at) return;
    clearTimeout(this.timer);
    this.at = at;
    // A few ms late rather than early: the row is admittable once now() >= start_at.
    this.timer = setTimeout(() => {
      this.at = undefined;
      this.timer = undefined;
      this.onDue();
    }, delay + 5);
    this.timer.unref?.();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.at = undefined;
  }
}
