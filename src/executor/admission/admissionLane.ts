/**
 * The executor's admission lane: when new workflows wait, admission transactions run beside the
 * claim loop (a burst of new workflows never holds back the claims of ready steps), up to
 * `maxInFlight` at once; each takes its own batch (FOR UPDATE SKIP LOCKED, so two never take
 * the same workflow).
 *
 * - `pending` says new workflows may wait (a NOTIFY, a poll, a full batch, a start_at alarm);
 * - `start(free)` starts an admission if one may run now (admissionPace.ts decides how many
 *   workflows and how many first steps it may claim) and returns how many it asked for;
 * - after a batch that came back full (a backlog), the next starts at once and another beside it
 *   (up to `maxInFlight`); a batch that was not full asks when the earliest delayed start
 *   (`start_at`) comes and sets the alarm for it;
 * - a failed admission is told to `onError` and retried after a backoff: it never stops the loop;
 * - a batch takes about ADMISSION_TARGET_MS at most (BatchPace, from the time per workflow of the
 *   recent ones): a workflow inserted while one runs (another role's, admitted fairly by the
 *   next: lanes.ts) waits no longer than about that for its turn.
 */
import type { Admission } from './admission.js';
import { admissionPace } from './admissionPace.js';
import { BatchPace } from '../core/batchPace.js';
import { backoffMs } from '../core/dbOutage.js';
import { StartAtAlarm } from './startAtAlarm.js';

export interface AdmissionLaneDeps {
  admitBatch: number;
  /** Admission transactions at once. */
  maxInFlight: number;
  /** Admits up to `limit` workflows, claiming up to `claimSlots` of their first steps as it creates them. */
  admit(limit: number, claimSlots: number): Promise<Admission>;
  /** Milliseconds until the earliest delayed start, if a workflow waits for one. */
  nextStartAtInMs(): Promise<number | undefined>;
  /** Told of every admission that committed (ready first steps, a delayed one). */
  onAdmitted(r: Admission): void;
  /** Told of a failed admission (it is retried). */
  onError(err: unknown): void;
  /** Wakes the claim loop now, or in `ms`. */
  wake(): void;
  wakeIn(ms: number): void;
}

/** What one admission transaction should take, roughly (BatchPace). */
const ADMISSION_TARGET_MS = 150;

export class AdmissionLane {
  /** Whether new workflows may be waiting. */
  pending = true;
  private readonly inFlight = new Set<Promise<void>>();
  /** Since when new workflows wait for a free slot of this executor (undefined: they don't). */
  private blockedSince: number | undefined;
  private errors = 0;
  /** The last admission came back full: a backlog, so the next may start before this one ends. */
  private lastFull = false;
  /** No admission starts before this (a backoff after a failure). */
  private retryAt = 0;
  private closed = false;
  private readonly alarm = new StartAtAlarm(() => {
    this.pending = true;
    this.deps.wake();
  });
  private readonly pace: BatchPace;

  constructor(private readonly deps: AdmissionLaneDeps) {
    this.pace = new BatchPace(deps.admitBatch, ADMISSION_TARGET_MS);
  }

  /** Admission transactions running now. */
  get running(): number {
    return this.inFlight.size;
  }

  /**
   * Starts an admission if new workflows may wait and one may run now; returns how many
   * workflows it asked for (0: none started). `free`: this executor's free slots (prefetched
   * steps included); `backlog`: whether ready steps wait for them.
   */
  start(free: number, backlog: boolean): number {
    if (!this.pending || this.closed || this.inFlight.size >= this.deps.maxInFlight) return 0;
    const now = Date.now();
    if (now < this.retryAt) {
      this.deps.wakeIn(this.retryAt - now);
      return 0;
    }
    if (free === 0) this.blockedSince ??= now;
    const pace = admissionPace({ free, backlog, admitBatch: this.deps.admitBatch, blockedForMs: free > 0 ? 0 : now - this.blockedSince! });
    if (!pace.admit) {
      this.deps.wakeIn(pace.retryInMs);
      return 0;
    }
    this.blockedSince = undefined;
    // In a backlog the next admission starts beside this one (up to maxInFlight).
    this.pending = this.lastFull;
    const limit = Math.min(pace.limit, this.pace.size());
    const run: Promise<void> = this.run(limit, pace.claimSlots).finally(() => {
      this.inFlight.delete(run);
      this.deps.wake();
    });
    this.inFlight.add(run);
    return limit;
  }

  /** Waits for the admissions in flight. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** No more admissions or alarms (a stop); those in flight finish. */
  close(): void {
    this.closed = true;
    this.alarm.close();
  }

  private async run(limit: number, claimSlots: number): Promise<void> {
    try {
      const startedAt = performance.now();
      const r = await this.deps.admit(limit, claimSlots);
      this.pace.recorded(r.admitted, performance.now() - startedAt);
      this.errors = 0;
      this.deps.onAdmitted(r);
      this.lastFull = r.admitted >= limit;
      // A workflow deferred for a lock held elsewhere (admissionLocks.ts) is tried again when its backoff ends.
      if (r.deferredInMs !== undefined) this.alarm.setIn(r.deferredInMs);
      if (this.lastFull) {
        // A full batch: more may wait; the next admission starts at once.
        this.pending = true;
        return;
      }
      // Caught up: if a workflow waits for its start_at, be woken for it (not by a fast poll).
      const ms = await this.deps.nextStartAtInMs();
      if (ms !== undefined) this.alarm.setIn(ms);
    } catch (err) {
      this.lastFull = false;
      this.deps.onError(err);
      this.pending = true;
      this.retryAt = Date.now() + backoffMs(++this.errors);
    }
  }
}
