/**
 * After a claim that took reported worker steps (sql/0027), or a pickup of readied signal waits (sql/0025, 0045), the executor looks for more: after
 * `everyMs`, then twice as long after each look that found none, until `lingerMs` pass without
 * finding one (a look that finds some starts over at `everyMs`). A worker's report NOTIFYs only when no
 * other report is waiting (sql/0034): the waiting one woke the executors, and a report that
 * skipped its NOTIFY because of it may commit just after the claim that takes that one — the
 * next look finds it. A signal that readies a wait skips its NOTIFY the same way (sql/0036). The
 * poll interval stays the backstop (a report made ready after a second of waiting NOTIFYs again).
 * No I/O here: `look` wakes the claim loop.
 */
export interface ReportLookoutOptions {
  /** The first look's delay after a claim that found reports (default 10 ms). */
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
  #nextMs: number;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(opts: ReportLookoutOptions) {
    this.#everyMs = opts.everyMs ?? 10;
    this.#lingerMs = opts.lingerMs ?? 500;
    this.#look = opts.look;
    this.#now = opts.now ?? Date.now;
    this.#nextMs = this.#everyMs;
  }

  /** After every claim: the rows it took. */
  claimed(rows: readonly object[]): void {
    this.looked(rows.some(mayHaveSkippedItsWakeup));
  }

  /** After a look for such steps (a claim, or the signal pickup): whether it found any. */
  looked(found: boolean): void {
    const now = this.#now();
    if (found) {
      this.#lastFoundAt = now;
      this.#nextMs = this.#everyMs;
    }
    if (this.#closed || this.#timer !== undefined || now - this.#lastFoundAt >= this.#lingerMs) return;
    const ms = this.#nextMs;
    this.#nextMs = Math.min(this.#lingerMs, ms * 2);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#closed) this.#look();
    }, ms);
    this.#timer.unref();
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** A reported worker step (`task_ended` set) or a readied signal wait (no tool, `args.signal`). */
function mayHaveSkippedItsWakeup(row: object): boolean {
  const r = row as { task_ended?: unknown; tool?: unknown; args?: { signal?: unknown } | null };
  return r.task_ended != null || (r.tool == null && r.args?.signal != null);
}
