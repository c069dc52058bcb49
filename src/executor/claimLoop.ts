/**
 * The claim loop: one round after another until the executor stops — reconcile after an outage,
 * start an admission beside the loop, handle redrive requests, claim ready steps up to the free
 * slots (or, with every tool slot busy, the readied gates, due timers and reported worker steps
 * that take none), then wait for a wake-up or the poll interval. A failed round is logged and
 * retried with backoff; it never ends the loop.
 *
 * What may be waiting is kept in LoopFlags, which the executor's wake-ups set (executor.ts) and
 * a round clears when it looks; the loop owns the claim state between claims (fairness) and the
 * second look for ready steps a claim may have skipped.
 */
import type pg from 'pg';
import { StepError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { AdmissionLane } from './admission/admissionLane.js';
import { claimSteps, newFairClaimState, type ClaimDeps } from './claims/claimSteps.js';
import type { RunningTasks } from './claims/runningTasks.js';
import type { SkippedReadyRecheck } from './claims/skippedReadyRecheck.js';
import type { ReportLookout } from './claims/reportLookout.js';
import type { Slots } from './claims/slots.js';
import { backoffMs, type DatabaseOutage } from './core/dbOutage.js';
import type { ClaimOnCreate, CreatedClaim } from './core/txWriter.js';
import type { TxDeps, TxResult } from './core/txTypes.js';
import { claimDepsOf, type ExecutorCore } from './executorDeps.js';
import { logRetriedFailure } from './loopErrors.js';
import type { OutcomeQueue } from './outcomes/outcomeQueue.js';
import type { StepTasks } from './steps/stepTasks.js';
import { handBackStraysAfterOutage } from './supervision/recovery.js';
import { redriveRequested } from './transitions/redrive.js';
import { LockDeferrals } from './core/lockDeferrals.js';
import type { Waker } from './wakeups/waker.js';

/** Readied gates and due timers claimed at once while every tool slot is busy. */
const TOOLLESS_BATCH = 32;

/** What may be waiting: set by wake-ups (and every poll tick), cleared by the round that looks. */
export interface LoopFlags {
  /** Ready steps the last claim did not take (any wake-up, full claim, alarm, poll). */
  moreReady: boolean;
  /** Readied gates or due timers: claimed even when every tool slot is busy. */
  toollessPending: boolean;
  /** Redrive requests: set by their NOTIFY and every poll tick and sweep (redrive.ts). */
  redrivePending: boolean;
  /** The database came back: check which running steps are really ours. */
  reconcilePending: boolean;
}

export interface ClaimLoopDeps {
  core: ExecutorCore;
  tx: TxDeps;
  flags: LoopFlags;
  waker: Waker;
  admission: AdmissionLane;
  slots: Slots;
  running: RunningTasks;
  tasks: StepTasks;
  outcomes: OutcomeQueue;
  outage: DatabaseOutage;
  /** Readied steps a claim may have skipped (locked by a client at that moment): looked for again soon. */
  recheck: SkippedReadyRecheck;
  /** Looks again soon after claiming reported worker steps (they skip NOTIFYs while one waits). */
  reportLookout: ReportLookout;
  stopping: () => boolean;
  /** Runs a transaction that may claim the steps it creates (executor.ts, runWithCreateClaims). */
  withCreateClaims: <T extends { claimed: CreatedClaim[] }>(fn: (claim: ClaimOnCreate | undefined) => Promise<T>, maxSlots?: number) => Promise<T>;
  handleTx: (r: TxResult) => void;
  wakeIn: (ms: number) => void;
}

export class ClaimLoop {
  private readonly fairness = newFairClaimState();
  /** Redrive requests that met a lock held elsewhere: skipped for a backoff (redrive.ts). */
  private readonly heldRedrives = new LockDeferrals();

  constructor(private readonly deps: ClaimLoopDeps) {}

  private get log(): Logger {
    return this.deps.core.deps.log;
  }

  private get pool(): pg.Pool {
    return this.deps.core.pool;
  }

  /** Rounds until the executor stops. */
  async run(): Promise<void> {
    const { flags, waker, admission, slots, outage, stopping } = this.deps;
    let errors = 0;
    while (!stopping()) {
      try {
        waker.clear();
        if (flags.reconcilePending) {
          flags.reconcilePending = false;
          await this.reconcileAfterOutage();
        }
        let claimed = 0;
        // New workflows: an admission starts beside the loop (admissionLane.ts), no more than this
        // executor can start soon (half its free slots while ready steps wait), so a burst spreads
        // over the executors. Prefetched steps waiting for a slot count as room: slots are about
        // to free, and a new workflow must not wait behind them.
        const admitted = admission.start(slots.free + slots.waiting, slots.backlog);
        let reachedDb = false;
        if (flags.redrivePending) {
          await this.redrive();
          reachedDb = true;
        }
        const left = slots.claimable;
        // Only when ready steps may wait: an empty claim would hold the next admission back.
        if (left > 0 ? flags.moreReady : flags.toollessPending) {
          claimed = left > 0 ? await this.claimAndRun(left) : await this.claimToolless();
          reachedDb = true;
        }
        if (reachedDb) outage.succeeded();
        errors = 0;
        const busy = slots.claimable > 0 && (claimed > 0 || admitted > 0);
        if (!busy && !waker.isWoken && !stopping()) {
          // Nothing woke us within the poll interval: look for missed work, new workflows included.
          if (!(await waker.wait(this.deps.core.opts.pollIntervalMs))) admission.pending = flags.toollessPending = flags.redrivePending = flags.moreReady = true;
          // Steps finishing together free their slots in the same tick: claim for all of them at once.
          await new Promise((r) => setImmediate(r));
        }
      } catch (err) {
        errors++;
        const delay = backoffMs(errors);
        // A lost connection is part of an outage, logged once; anything else is logged each time.
        if (!outage.failed(err, 'claim loop')) logRetriedFailure(this.log, err, 'executor iteration failed; retrying', { delayMs: delay });
        if (outage.active) flags.reconcilePending = true;
        // Wake-ups don't cut the backoff short (a finishing step would make it a busy loop); stop does.
        const until = Date.now() + delay;
        while (!stopping() && Date.now() < until) {
          waker.clear();
          await waker.wait(until - Date.now());
        }
      }
    }
  }

  /** Handles redrive requests (failed workflows set back to running); what they create is claimed like a transition's. */
  private async redrive(): Promise<void> {
    const { flags, core } = this.deps;
    flags.redrivePending = false;
    const r = await this.deps.withCreateClaims((claim) => redriveRequested(this.deps.tx, core.opts.admitBatch, claim, this.heldRedrives), this.deps.slots.free);
    if (r.handled >= core.opts.admitBatch) flags.redrivePending = true;
    this.deps.handleTx(r);
  }

  /** With every tool slot busy: claims readied gates, due timers and reported worker steps, which take no slot. */
  private async claimToolless(): Promise<number> {
    const { flags } = this.deps;
    flags.toollessPending = false;
    const claim = await claimSteps(this.claimDeps(), TOOLLESS_BATCH, { toollessOnly: true });
    if (claim.moreReady) flags.toollessPending = true;
    else this.recheckSkipped(claim.rows.length);
    for (const id of claim.cancelledRunning) this.deps.running.abort(id, new StepError('cancelled', 'step was cancelled'));
    for (const row of claim.rows) this.deps.tasks.start(row);
    this.deps.reportLookout.claimed(claim.rows);
    return claim.rows.length;
  }

  private claimDeps(): ClaimDeps {
    return claimDepsOf(this.deps.core, this.fairness);
  }

  private async claimAndRun(free: number): Promise<number> {
    const { flags, slots } = this.deps;
    // Cleared before the claim: work announced while it runs sets it again.
    flags.moreReady = false;
    // The slots are promised to this claim until its rows are started (in the same tick); gated
    // steps (keys, rates) only get those free now: a prefetched one would start after its token.
    const gatedFree = slots.free;
    const claim = await slots.reserving(free, () => claimSteps(this.claimDeps(), free, { gatedFree }));
    slots.backlog = claim.moreReady;
    if (claim.moreReady) flags.moreReady = true;
    else this.recheckSkipped(claim.rows.length);
    if (claim.retryInMs !== undefined) this.deps.wakeIn(claim.retryInMs);
    for (const id of claim.cancelledRunning) this.deps.running.abort(id, new StepError('cancelled', 'step was cancelled'));
    for (const row of claim.rows) this.deps.tasks.start(row, claim.fair);
    this.deps.reportLookout.claimed(claim.rows);
    return claim.rows.length;
  }

  /** A claim that saw every row it could lock took fewer than were announced: look again soon. */
  private recheckSkipped(claimed: number): void {
    const ms = this.deps.recheck.afterClaim(claimed);
    if (ms !== undefined) this.deps.wakeIn(ms);
  }

  /** After an outage: hand back the steps a claim took whose answer never arrived (see recovery.ts). */
  private async reconcileAfterOutage(): Promise<void> {
    const { opts } = this.deps.core;
    const deps = { pool: this.pool, executorId: opts.executorId, schema: opts.schema, log: this.log };
    if ((await handBackStraysAfterOutage(deps, this.deps.running, this.deps.outcomes)) > 0) this.deps.flags.moreReady = true;
  }
}
