/**
 * Failed authentications per client address: after `maxFailures` wrong tokens (a bearer header or
 * the sign-in form) within `windowMs`, that address gets 429 for every authentication attempt
 * until the window it started ends, so an API token cannot be guessed at network speed. Right
 * tokens never count. Addresses are forgotten when their window ends; at most `maxAddresses`
 * are remembered (the oldest go first), so a flood of addresses cannot exhaust memory.
 *
 * Behind a reverse proxy every client has the proxy's address and shares one allowance: a client
 * failing there delays the others until the window ends (docs/dashboard.md).
 */
export interface AuthThrottleOptions {
  maxFailures: number;
  windowMs: number;
  maxAddresses: number;
  now: () => number;
}

export const DEFAULT_AUTH_THROTTLE: AuthThrottleOptions = { maxFailures: 10, windowMs: 60_000, maxAddresses: 10_000, now: Date.now };

interface Window {
  startedAt: number;
  failures: number;
}

export class AuthThrottle {
  private readonly windows = new Map<string, Window>();
  private readonly opts: AuthThrottleOptions;

  constructor(opts: Partial<AuthThrottleOptions> = {}) {
    this.opts = { ...DEFAULT_AUTH_THROTTLE, ...opts };
  }

  /** Milliseconds until `address` may try again; 0 when it may now. */
  retryAfterMs(address: string): number {
    const w = this.current(address);
    if (!w || w.failures < this.opts.maxFailures) return 0;
    return w.startedAt + this.opts.windowMs - this.opts.now();
  }

  /** Counts a wrong token from `address`. */
  failed(address: string): void {
    const w = this.current(address);
    if (w) {
      w.failures++;
      return;
    }
    this.windows.set(address, { startedAt: this.opts.now(), failures: 1 });
    while (this.windows.size > this.opts.maxAddresses) {
      const oldest = this.windows.keys().next().value;
      if (oldest === undefined) break;
      this.windows.delete(oldest);
    }
  }

  /** The window of `address` if it has not ended (an ended one is forgotten). */
  private current(address: string): Window | undefined {
    const w = this.windows.get(address);
    if (w && this.opts.now() - w.startedAt >= this.opts.windowMs) {
      this.windows.delete(address);
      return undefined;
    }
    return w;
  }
}
