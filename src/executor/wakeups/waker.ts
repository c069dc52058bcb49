/**
 * The claim loop's alarm clock: `wake()` from anywhere (a NOTIFY, a finished step, a stop),
 * `wait(ms)` in the loop, `wakeIn(ms)` for work that becomes ready later than now but sooner
 * than the next poll (a retry's backoff, a timer). One per executor.
 */
export class Waker {
  private resolveWait: (() => void) | undefined;
  private woken = false;
  private timer: NodeJS.Timeout | undefined;
  private at: number | undefined;
  private closed = false;

  constructor(private readonly opts: { pollIntervalMs: number; onTimer: () => void }) {}

  /** Whether something woke the loop since `clear()`. */
  get isWoken(): boolean {
    return this.woken;
  }

  wake(): void {
    this.woken = true;
    this.resolveWait?.();
  }

  /** Forgets earlier wake-ups, at the start of an iteration. */
  clear(): void {
    this.woken = false;
  }

  /** Resolves true when woken (or already woken, or closed), false when `ms` ran out. */
  wait(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(false), ms);
      const done = (woken: boolean) => {
        clearTimeout(timer);
        this.resolveWait = undefined;
        resolve(woken);
      };
      this.resolveWait = () => done(true);
      if (this.woken || this.closed) done(true);
    });
  }

  /** Wakes the loop in `ms` (calling `onTimer` first), unless the poll comes first or an earlier alarm is set. */
  wakeIn(ms: number): void {
    if (this.closed || ms >= this.opts.pollIntervalMs) return;
    const at = Date.now() + ms;
    if (this.at !== undefined && this.at <= at) return;
    clearTimeout(this.timer);
    this.at = at;
    this.timer = setTimeout(() => {
      this.at = undefined;
      this.opts.onTimer();
      this.wake();
    }, ms + 1);
  }

  /** No more alarms; a pending or later `wait` resolves at once. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.wake();
  }
}
