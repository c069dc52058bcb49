/**
 * Latest-value throttling for a step's progress: however often a tool reports, at most one
 * write starts per `intervalMs`, never two at once, and the last value reported is always
 * written (at the end of its interval). Values reported in between are replaced, not queued.
 * After `close()` nothing more is written: a value still waiting is written at once (its
 * statement is fenced on the running attempt), and later reports are ignored.
 */

/** Runs `fn` after `ms`; returns what cancels it. Injected so tests control time. */
export type Schedule = (fn: () => void, ms: number) => () => void;

export interface ProgressThrottleOptions<T> {
  intervalMs: number;
  /** Writes one value; a failure is the writer's to log (it must not reject). */
  write: (value: T) => Promise<void>;
  now?: () => number;
  schedule?: Schedule;
}

const defaultSchedule: Schedule = (fn, ms) => {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

export class ProgressThrottle<T> {
  readonly #intervalMs: number;
  readonly #write: (value: T) => Promise<void>;
  readonly #now: () => number;
  readonly #schedule: Schedule;
  #pending: { value: T } | undefined;
  #lastStart = -Infinity;
  #inFlight: Promise<void> | undefined;
  #cancelTimer: (() => void) | undefined;
  #closed = false;

  constructor(opts: ProgressThrottleOptions<T>) {
    this.#intervalMs = opts.intervalMs;
    this.#write = opts.write;
    this.#now = opts.now ?? Date.now;
    this.#schedule = opts.schedule ?? defaultSchedule;
  }

  /** Reports a value: written now if the interval allows, else when it ends (unless replaced). */
  push(value: T): void {
    if (this.#closed) return;
    this.#pending = { value };
    this.#pump();
  }

  /**
   * Stops: a value still waiting is written now, nothing after. Resolves when the last write
   * has finished.
   */
  async close(): Promise<void> {
    if (this.#closed) return this.#inFlight;
    this.#closed = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    await this.#inFlight;
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending) await this.#start(pending.value);
  }

  #pump(): void {
    if (this.#closed || !this.#pending || this.#inFlight || this.#cancelTimer) return;
    const wait = this.#lastStart + this.#intervalMs - this.#now();
    if (wait > 0) {
      this.#cancelTimer = this.#schedule(() => {
        this.#cancelTimer = undefined;
        this.#pump();
      }, wait);
      return;
    }
    const { value } = this.#pending;
    this.#pending = undefined;
    void this.#start(value).then(() => this.#pump());
  }

  #start(value: T): Promise<void> {
    this.#lastStart = this.#now();
    const run = this.#write(value)
      .catch(() => undefined)
      .finally(() => {
        if (this.#inFlight === run) this.#inFlight = undefined;
      });
    this.#inFlight = run;
    return run;
  }
}
