/**
 * Signal matches deferred past a held wait row (sql/0042) are completed by the watchdog's sweep;
 * most rows are held only for a moment, though — by another signal's transaction racing for the
 * same workflow — so a signal that deferred a match NOTIFYs at its commit and the executor that
 * hears it tries the deferred matches soon: after `firstMs`, then after each try that readied
 * nothing, `factor` times longer, until `giveUpMs` (a row a client keeps holding is the sweep's
 * again). Hints arriving while a try is due add nothing. No I/O here: `retry` does the work and
 * says how many waits it readied.
 */
export interface DeferredSignalRetryOptions {
  retry: () => Promise<number>;
  onError: (err: unknown) => void;
  firstMs?: number;
  factor?: number;
  giveUpMs?: number;
}

export class DeferredSignalRetry {
  readonly #retry: () => Promise<number>;
  readonly #onError: (err: unknown) => void;
  readonly #firstMs: number;
  readonly #factor: number;
  readonly #giveUpMs: number;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(opts: DeferredSignalRetryOptions) {
    this.#retry = opts.retry;
    this.#onError = opts.onError;
    this.#firstMs = opts.firstMs ?? 20;
    this.#factor = opts.factor ?? 4;
    this.#giveUpMs = opts.giveUpMs ?? 1_500;
  }

  /** A signal deferred a match: try soon. */
  hinted(): void {
    if (this.#closed) return;
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    if (this.#timer === undefined) this.#schedule(this.#firstMs);
  }

  /** No more tries; resolves once the one in progress (if any) has ended. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inFlight;
  }

  #schedule(ms: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#inFlight = this.#try(ms).finally(() => (this.#inFlight = undefined));
    }, ms);
    this.#timer.unref();
  }

  async #try(waitedMs: number): Promise<void> {
    if (this.#closed) return;
    this.#again = false;
    let readied = 0;
    try {
      readied = await this.#retry();
    } catch (err) {
      this.#onError(err);
    }
    if (this.#closed) return;
    if (this.#again || readied > 0) return this.#schedule(this.#firstMs);
    const next = waitedMs * this.#factor;
    if (next <= this.#giveUpMs) this.#schedule(next);
  }
}
