/**
 * The signal lane: a loop of its own that hands readied signal waits to the outcome lane
 * (SignalPickup), beside the claim loop rather than inside its rounds. A look never waits for a
 * claim, an admission or a redrive to finish first, and a claim never waits for a look.
 *
 * It looks when asked (`request()`: a stepReady NOTIFY), at every poll interval (a signal whose
 * NOTIFY was skipped or lost), after a look that came back full, and, while looks keep finding
 * waits, every SIGNAL_LOOK_EVERY_MS (its own ReportLookout): a signal that readies a wait skips its
 * NOTIFY while another wait readied just before is still on its way (sql/0036, 0045), and the
 * next look finds it. With the outcome queue full it looks again NO_ROOM_MS later. A failed look
 * is logged (once per outage) and retried with backoff; it never ends the loop.
 */
import { backoffMs, type DatabaseOutage } from '../core/dbOutage.js';
import { Waker } from '../wakeups/waker.js';
import { ReportLookout } from './reportLookout.js';
import type { Pickup } from './signalPickup.js';

/** With the outcome queue full, readied signal waits are looked for again this much later. */
export const NO_ROOM_MS = 20;

/**
 * After a look that found waits, the next one this much later (doubling while looks find none).
 * Looking every 3 ms instead gave no lower latency at 1,000 signals/s (the outcome lane's
 * transactions set the pace) and cost PostgreSQL more CPU per signal (smaller looks).
 */
export const SIGNAL_LOOK_EVERY_MS = 10;

export interface SignalLaneDeps {
  /** Hands up to `room` readied waits to the outcome lane (SignalPickup.pickUp). */
  pickUp: (room: number) => Promise<Pickup>;
  /** Outcomes the outcome queue has room for now (Slots.outcomeRoom). */
  room: () => number;
  outage: DatabaseOutage;
  /** Logs a failed look that is not part of an outage (loopErrors.ts: deadlocks with clients at warn, the rest at error). */
  logFailure: (err: unknown, delayMs: number) => void;
  pollIntervalMs: number;
}

export class SignalLane {
  readonly #deps: SignalLaneDeps;
  /** Readied waits may be waiting: set by requests, poll ticks and full looks; cleared by the look. */
  #pending = true;
  #closed = false;
  readonly #waker: Waker;
  readonly #lookout: ReportLookout;

  constructor(deps: SignalLaneDeps) {
    this.#deps = deps;
    this.#waker = new Waker({ pollIntervalMs: deps.pollIntervalMs, onTimer: () => (this.#pending = true) });
    this.#lookout = new ReportLookout({ everyMs: SIGNAL_LOOK_EVERY_MS, look: () => this.request() });
  }

  /** Readied signal waits may be waiting: look soon. */
  request(): void {
    if (this.#closed) return;
    this.#pending = true;
    this.#waker.wake();
  }

  /** Looks until `close()`. */
  async run(): Promise<void> {
    const { outage, logFailure } = this.#deps;
    let errors = 0;
    while (!this.#closed) {
      try {
        this.#waker.clear();
        let again = false;
        if (this.#pending) {
          again = await this.#look();
          outage.succeeded();
          errors = 0;
        }
        if (!again && !this.#waker.isWoken && !this.#closed) {
          if (!(await this.#waker.wait(this.#deps.pollIntervalMs))) this.#pending = true;
        }
      } catch (err) {
        errors++;
        const delay = backoffMs(errors);
        this.#pending = true;
        if (!outage.failed(err, 'signal pickup')) logFailure(err, delay);
        await this.#pause(delay);
      }
    }
  }

  /** Stops the loop (a look in progress finishes) and its alarms. */
  close(): void {
    this.#closed = true;
    this.#lookout.close();
    this.#waker.close();
  }

  /** One look; true when the next should follow at once (it came back full and handed some over). */
  async #look(): Promise<boolean> {
    this.#pending = false;
    const r = await this.#deps.pickUp(this.#deps.room());
    this.#lookout.looked(r.picked > 0);
    if (!r.more) return false;
    this.#pending = true;
    if (r.picked > 0) return true;
    // No room: the outcome lane is behind (or a fair look found nothing); look again a little later.
    await this.#pause(NO_ROOM_MS);
    return true;
  }

  /** Waits `ms`, or less if the lane is closed meanwhile (requests do not cut it short). */
  async #pause(ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (!this.#closed && Date.now() < until) {
      this.#waker.clear();
      await this.#waker.wait(until - Date.now());
    }
  }
}
