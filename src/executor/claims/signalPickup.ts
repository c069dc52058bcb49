/**
 * Readied signal waits go to the outcome lane without being claimed. A claim would be a
 * transaction and a commit of its own before the lane's (signal → wait running → recorded); here
 * the lane records the wait straight from `ready` — fenced by that status, so whichever executor
 * records it first wins and the others change nothing — in the transaction that starts its next
 * step. No claim statement takes one (NOT_SIGNALLED in claims.ts).
 *
 * The pickup only reads (peekReadiedSignalWaits): a crash before the lane commits leaves the row
 * ready for the next look, here or on another executor. A wait handed to the lane is not handed
 * again until the lane lets go of it; one that comes back within RESTING_MS of that (its outcome
 * would not record: a guard refused it, say) rests that long, so it never spins.
 *
 * Each wait the lane recorded is told to `onRecorded` (its metrics, span and log line:
 * steps/stepReports.ts); one it let go of, or that another executor recorded first, is not.
 *
 * Oldest first; after a look that came back full (a backlog), the next is fair across roles
 * (peekReadiedSignalWaitsFairly, round-robin from where the last fair look stopped), so one
 * role's flood of signals never holds another role's wake-up behind all of it.
 */
import { peekReadiedSignalWaits, peekReadiedSignalWaitsFairly, type Queryable, type ReadiedSignalWait } from '../../db/queries.js';
import type { FinishInput, Outcome } from '../core/txTypes.js';
import { signalOutcome } from '../transitions/signalWaits.js';

export interface SignalPickupDeps {
  db: Queryable;
  /** Queues an outcome; `settled` once it is recorded or given up on, with whether this executor recorded it (OutcomeQueue.add). */
  record: (input: FinishInput, settled: (recorded: boolean) => void) => void;
  /** Told of each wait the lane recorded (not of one let go of, nor of one recorded elsewhere first). */
  onRecorded?: (wait: ReadiedSignalWait, outcome: Outcome) => void;
  now?: () => number;
}

/** Readied waits handed to the lane at one look, at most. */
export const PICKUP_BATCH = 64;

/** How long a wait the lane let go of without recording it rests before it is handed again. */
export const RESTING_MS = 1_000;

export interface Pickup {
  /** Waits handed to the lane. */
  picked: number;
  /** Whether more may be ready (a full look, or no room to look). */
  more: boolean;
}

export class SignalPickup {
  readonly #deps: SignalPickupDeps;
  readonly #now: () => number;
  /** Handed to the lane, not let go of yet. */
  readonly #inFlight = new Set<string>();
  /** When the lane let go of each wait (kept RESTING_MS). */
  readonly #releasedAt = new Map<string, number>();
  /** Waits that came back too soon, until when they rest. */
  readonly #resting = new Map<string, number>();
  /** The last look came back full: the next one is fair across roles, from this role on. */
  #fairNext = false;
  #fromRole = '';

  constructor(deps: SignalPickupDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? Date.now;
  }

  /** Waits on their way to the lane. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Hands up to `room` readied waits (at most PICKUP_BATCH) to the lane. */
  async pickUp(room: number): Promise<Pickup> {
    const limit = Math.min(PICKUP_BATCH, Math.floor(room));
    if (limit <= 0) return { picked: 0, more: true };
    const now = this.#now();
    this.#forgetOlderThan(now - RESTING_MS, now);
    const excluding = [...this.#inFlight, ...this.#resting.keys()];
    const fair = this.#fairNext;
    let rows: ReadiedSignalWait[];
    if (fair) {
      const look = await peekReadiedSignalWaitsFairly(this.#deps.db, { limit, fromRole: this.#fromRole, excluding });
      rows = look.rows;
      this.#fromRole = look.nextRole ?? '';
      this.#fairNext = false;
    } else {
      rows = await peekReadiedSignalWaits(this.#deps.db, limit, excluding);
      this.#fairNext = rows.length >= limit;
    }
    let picked = 0;
    for (const row of rows) {
      if (this.#inFlight.has(row.id)) continue;
      const released = this.#releasedAt.get(row.id);
      if (released !== undefined) {
        this.#resting.set(row.id, released + RESTING_MS);
        continue;
      }
      this.#inFlight.add(row.id);
      picked++;
      const input: FinishInput = {
        stepId: row.id,
        workflowId: row.workflow_id,
        guard: 'signalled',
        outcome: signalOutcome(row.result),
        lane: row.created_role ?? '',
        user: row.created_by,
      };
      this.#deps.record(input, (recorded) => {
        this.#inFlight.delete(row.id);
        this.#releasedAt.delete(row.id); // kept in release order (#forgetOlderThan)
        this.#releasedAt.set(row.id, this.#now());
        if (recorded) this.#deps.onRecorded?.(row, input.outcome);
      });
    }
    // After a fair look the oldest may still wait: look again.
    return { picked, more: fair || rows.length >= limit };
  }

  #forgetOlderThan(cutoff: number, now: number): void {
    // Map iteration is in insertion order, which is release order: stop at the first recent one.
    for (const [id, at] of this.#releasedAt) {
      if (at >= cutoff) break;
      this.#releasedAt.delete(id);
    }
    for (const [id, until] of this.#resting) if (until <= now) this.#resting.delete(id);
  }
}
