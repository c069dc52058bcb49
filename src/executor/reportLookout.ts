/**
 * After a claim that took reported worker steps (sql/0027), the executor looks for more every
 * `everyMs` until `lingerMs` pass without finding one. A worker's report NOTIFYs only when no
 * other report is waiting (sql/0034): the waiting one woke the executors, and a report that
 * skipped its NOTIFY because of it may commit just after the claim that takes that one — the
 * next look finds it. The poll interval stays the backstop (a report made ready after a second
 * of waiting NOTIFYs again). No I/O here: `look` wakes the claim loop.
 */
export interface ReportLookoutOptions {
  /** How often to look while reports are coming in (default 10 ms). */
  everyMs?: number;
  /** How long to keep looking after the last claim that found one (default 500 ms). */
  lingerMs?: number;
  /** Wakes the claim loop to claim reported steps. */
  look: () => void;
  now?: () => number;
}

export class ReportLookout {
  readonly #everyMs: number;
  readonly #lingerMs: number;
  readonly #look: () => void;
  readonly #now: () => number;
  #lastFoundAt = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(opts: ReportLookoutOptions) {
    this.#everyMs = opts.everyMs ?? 10;
    this.#lingerMs = opts.lingerMs ?? 500;
    this.#look = opts.look;
    this.#now = opts.now ?? Date.now;
  }

  /** After every claim: the rows it took (a reported worker step has `task_ended` set). */
  claimed(rows: readonly object[]): void {
    const now = this.#now();
    if (rows.some((r) => (r as { task_ended?: unknown }).task_ended != null)) this.#lastFoundAt = now;
    if (this.#closed || this.#timer !== undefined || now - this.#lastFoundAt >= this.#lingerMs) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#closed) this.#look();
    }, this.#everyMs);
    this.#timer.unref();
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
