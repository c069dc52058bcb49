/**
 * The executor: a small loop around the pure flow logic.
 *   wake (NOTIFY, own completions, poll) → admit new workflows → claim ready steps up to the
 *   free slots → run each as its own task → finish it in one transaction → repeat.
 * A failed iteration is logged and retried with backoff; it never kills the process. A lost
 * database is an outage (logged once when it starts and once when it ends): work in flight
 * fails and is retried, finished outcomes wait in the OutcomeQueue, and when the database is back
 * the steps a claim took without our hearing of it are handed back.
 */
import type pg from 'pg';
import { createPool, type PoolOptions } from '../db/connect.js';
import { nextStartAtInMs } from '../db/queries/startAt.js';
import { writeSizeCaps } from '../db/queries/sizeCaps.js';
import { writePriorityCaps } from '../db/queries/capacity.js';
import { namingStatement, StepError } from '../errors.js';
import { resolveCaps } from '../flow/caps.js';
import { Listener } from './wakeups/listener.js';
import type { WakeupHint } from './wakeups/wakeupHint.js';
import { CancelChecks } from './wakeups/cancelChecks.js';
import { admitWorkflows } from './admission/admission.js';
import { finishSteps, type TxDeps, type TxResult } from './outcomes/transactions.js';
import { backoffMs, DatabaseOutage } from './core/dbOutage.js';
import { Heartbeat } from './supervision/heartbeat.js';
import { OutcomeQueue } from './outcomes/outcomeQueue.js';
import type { ClaimOnCreate, CreatedClaim } from './core/txWriter.js';
import { claimSteps, newFairClaimState, type ClaimDeps } from './claims/claimSteps.js';
import { abortStepsNoLongerOurs, handBackStraysAfterOutage, recoverOrphans } from './supervision/recovery.js';
import { drainAndClose } from './supervision/shutdown.js';
import { RunningTasks } from './claims/runningTasks.js';
import { StepTasks } from './steps/stepTasks.js';
import { runWithCreateClaims, Slots, type CreateClaims } from './claims/slots.js';
import { AdmissionLane } from './admission/admissionLane.js';
import { claimDepsOf, createClaimsOf, runStepDepsOf, txDepsOf, type ExecutorCore, type ExecutorDeps } from './executorDeps.js';
import { Waker } from './wakeups/waker.js';
import { SkippedReadyRecheck } from './claims/skippedReadyRecheck.js';
import { logRetriedFailure } from './loopErrors.js';
import { rescueOwnStepsPastLease, runWatchdogOnce } from './supervision/watchdog.js';
import { redriveRequested } from './transitions/redrive.js';
import { WorkflowCache } from './core/workflowCache.js';
import { NO_METRICS, type ExecutorMetrics } from '../telemetry/executorMetrics.js';
import { NO_TRACING, type StepTracing } from '../telemetry/stepTracing.js';

export { DEFAULT_EXECUTOR_OPTIONS, type ExecutorOptions } from './options.js';
import type { ExecutorOptions } from './options.js';

/**
 * Admission transactions at once. Two (one in the database while the next is prepared) measured
 * no faster than one on the 2-core bench machine, which a burst keeps busy either way.
 */
const MAX_ADMISSIONS_IN_FLIGHT = 1;

/** Readied gates and due timers claimed at once while every tool slot is busy. */
const TOOLLESS_BATCH = 32;

export type { ExecutorDeps } from './executorDeps.js';

export class Executor {
  private readonly pool: pg.Pool;
  private readonly core: ExecutorCore;
  private readonly listener: Listener;
  private readonly cache: WorkflowCache;
  private readonly running: RunningTasks;
  private readonly tasks: StepTasks;
  private readonly tx: TxDeps;
  private readonly outcomes: OutcomeQueue;
  private readonly outage: DatabaseOutage;
  private readonly heartbeat: Heartbeat;
  private readonly metrics: ExecutorMetrics;
  private readonly tracing: StepTracing;
  /** Set when the database came back: check which running steps are really ours. */
  private reconcilePending = false;
  private readonly slots: Slots;
  private readonly waker: Waker;
  /** Readied steps a claim may have skipped (locked by a client at that moment): looked for again soon. */
  private readonly recheck: SkippedReadyRecheck;
  /** Cancellation wake-ups, acted on once the workflow's row confirms them. */
  private readonly cancelChecks: CancelChecks;
  private readonly fairness = newFairClaimState();
  /** Whether readied gates or due timers may wait: claimed even when every tool slot is busy. */
  private toollessPending = true;
  private stopping = false;
  private started = false;
  /** Whether ready steps may wait that the last claim did not take (any wake-up, full claim, alarm, poll). */
  private moreReady = true;
  /** Admission transactions beside the loop (admissionLane.ts); `pending`: new workflows may wait. */
  private readonly admission: AdmissionLane;
  /** New workflows the database refuses to change at all (admission.ts): left alone. */
  private readonly unadmittable = new Set<string>();
  /** Fair admission's round-robin cursor over roles (admission.ts). */
  private readonly admissionTurns = { afterRole: '' };
  /** Whether redrive requests may be waiting: set by their NOTIFY and every poll tick (redrive.ts). */
  private redrivePending = true;
  private loopDone: Promise<void> | undefined;
  private watchdogTimer: NodeJS.Timeout | undefined;
  private watchdogRun: Promise<void> | undefined;

  constructor(
    private readonly opts: ExecutorOptions,
    private readonly deps: ExecutorDeps,
  ) {
    this.cache = new WorkflowCache(undefined, resolveCaps(deps.caps));
    this.metrics = deps.metrics ?? NO_METRICS;
    this.tracing = deps.tracing ?? NO_TRACING;
    this.recheck = new SkippedReadyRecheck(opts.pollIntervalMs);
    this.waker = new Waker({ pollIntervalMs: opts.pollIntervalMs, onTimer: () => (this.toollessPending = this.moreReady = true) });
    this.outage = new DatabaseOutage({
      log: deps.log,
      onRecovered: () => {
        this.reconcilePending = true;
        this.admission.pending = true;
        this.wake();
      },
    });
    const poolOpts: PoolOptions = {
      url: opts.databaseUrl,
      schema: opts.schema,
      role: 'executor',
      events: opts.emitEvents,
      max: opts.poolSize ?? Math.min(20, opts.concurrency + 2),
      onConnectionError: (err) => void this.outage.failed(err, 'pool'),
    };
    this.pool = createPool(poolOpts);
    const core: ExecutorCore = { opts, deps, pool: this.pool, cache: this.cache, metrics: this.metrics, tracing: this.tracing };
    this.core = core;
    this.tx = txDepsOf(core);
    this.outcomes = new OutcomeQueue({
      // Outcomes recorded alone (deferred: heavy, or their workflow locked elsewhere) may take long:
      // they promise no slots, so they never hold the claims back; what they create is claimed.
      record: (inputs) => (inputs.every((i) => i.alone) ? finishSteps(this.tx, inputs) : this.withCreateClaims((claim) => finishSteps(this.tx, inputs, claim))),
      onResult: (r) => this.handleTx(r),
      onFailure: (err) => this.outage.failed(err, 'outcomes'),
      onRecorded: () => this.outage.succeeded(),
      log: deps.log,
      metrics: this.metrics,
    });
    // Instant steps take no slot, so one admission batch of them may queue admitBatch outcomes.
    // Claims prefetch up to the concurrency (at most 64) beyond the free slots, so a slot that
    // frees is refilled without waiting for a claim (a fair claim's steps go ahead of them, and
    // admission counts them as room); not with limits, which count rows.
    const prefetch = deps.limits && !deps.limits.unlimited ? 0 : Math.min(64, opts.concurrency);
    this.slots = new Slots(opts.concurrency, () => this.outcomes.size, Math.max(opts.concurrency, opts.admitBatch), prefetch);
    this.running = new RunningTasks({ log: deps.log, slots: this.slots, onEnded: () => this.slotFreed() });
    this.cancelChecks = new CancelChecks({
      pool: this.pool,
      log: deps.log,
      runsHere: (id) => this.running.hasWorkflow(id),
      checkAll: this.tracing.enabled,
      onCancelled: (ids) => ids.forEach((id) => this.cancelled(id)),
    });
    this.tasks = new StepTasks({ core, tx: this.tx, running: this.running, outcomes: this.outcomes, runDeps: runStepDepsOf(core) });
    this.admission = new AdmissionLane({
      admitBatch: opts.admitBatch,
      maxInFlight: MAX_ADMISSIONS_IN_FLIGHT,
      admit: (limit, claimSlots) => namingStatement('admitWorkflows', () => this.withCreateClaims((claim) => admitWorkflows(this.tx, limit, claim, this.unadmittable, this.admissionTurns), claimSlots)),
      nextStartAtInMs: () => nextStartAtInMs(this.pool),
      onAdmitted: (r) => {
        this.outage.succeeded();
        // First steps left ready: let finishing steps free slots for the claims (claimOnCreate).
        if (r.readyNow) this.moreReady = this.slots.backlog = true;
        if (r.readyInMs !== undefined) this.wakeIn(r.readyInMs);
      },
      onError: (err) => {
        if (!this.outage.failed(err, 'admission')) logRetriedFailure(deps.log, err, 'admitting new workflows failed; retrying');
        if (this.outage.active) this.reconcilePending = true;
      },
      // Only the loop: an admission's end says nothing about ready steps (onAdmitted does, if it left some).
      wake: () => this.waker.wake(),
      wakeIn: (ms) => this.wakeIn(ms),
    });
    this.listener = new Listener({
      pool: poolOpts,
      schema: opts.schema,
      executorId: opts.executorId,
      // As long as this executor asks others to wait before presuming it dead, and three sweeps at least.
      leaderLeaseMs: Math.max(opts.deadAfterMs, 3 * opts.watchdogIntervalMs),
      log: deps.log,
      outage: this.outage,
      onWakeup: (p) => this.onWakeup(p),
      onReconnect: () => {
        this.admission.pending = this.redrivePending = true;
        this.wake();
      },
    });
    this.heartbeat = new Heartbeat({
      pool: this.pool,
      executorId: opts.executorId,
      intervalMs: opts.heartbeatIntervalMs,
      deadAfterMs: opts.deadAfterMs,
      concurrency: opts.concurrency,
      log: deps.log,
      outage: this.outage,
      onPresumedDead: () => void abortStepsNoLongerOurs(this.pool, this.opts.executorId, this.running).catch(() => {}),
    });
  }

  /** Finished steps whose outcome is not recorded yet (waiting for the database, for one). */
  get pendingOutcomes(): number {
    return this.outcomes.unrecorded;
  }

  get runningCount(): number {
    return this.running.size;
  }

  async start(): Promise<void> {
    if (this.started) throw new Error('executor already started');
    this.started = true;
    // The database refuses clients' over-cap inputs, results and flows by these (sql/0021).
    await writeSizeCaps(this.pool, this.cache.compiler.caps, this.opts.executorId);
    await writePriorityCaps(this.pool, this.deps.clients, this.opts.executorId);
    await this.listener.start();
    try {
      await this.heartbeat.start();
    } catch (err) {
      await this.listener.close();
      throw err;
    }
    await recoverOrphans(this.tx, (r) => this.handleTx(r));
    this.loopDone = this.loop();
    this.scheduleWatchdog(0);
    this.deps.log.info(
      { executorId: this.opts.executorId, schema: this.opts.schema, concurrency: this.opts.concurrency },
      'executor started',
    );
  }

  /** Wakes the claim loop (new ready work, a free slot). */
  wake(): void {
    this.moreReady = true;
    this.waker.wake();
  }

  /**
   * A slot came free. Claim again only if ready steps may be waiting: the last claim filled
   * every slot it asked for, or something announced new work since. Otherwise every finished
   * step would cost an empty claim.
   */
  private slotFreed(): void {
    if (this.moreReady) this.wake();
    else if (this.admission.pending) this.waker.wake();
  }

  /** A NOTIFY on stepd_wakeup: a hint of where to look, never a fact (wakeupHint.ts). */
  private onWakeup(hint: WakeupHint): void {
    if (hint.kind === 'cancelled') return this.cancelChecks.note(hint.workflowId);
    if (hint.kind === 'stepReady') {
      this.toollessPending = true;
      this.recheck.noteReadied();
      return this.wake();
    }
    // New workflows and redrives wake the loop for themselves, not the claims.
    if (hint.kind === 'redrive') this.redrivePending = true;
    else this.admission.pending = true;
    this.waker.wake();
  }

  /** The row says the workflow was cancelled: its running tools stop (their steps are cancelled rows already). */
  private cancelled(id: string): void {
    this.running.abortWorkflow(id, new StepError('cancelled', 'workflow was cancelled'));
    this.cache.forget(id);
    if (this.tracing.enabled) this.traceCancelled(id);
  }

  /** A workflow a client cancelled: the watchdog's leader records its workflow span (one executor does). */
  private traceCancelled(workflowId: string): void {
    void this.listener.ensureLeader().then(
      (leader) => leader && this.tracing.workflowsEnded(this.pool, [workflowId]),
      () => {},
    );
  }

  private async loop(): Promise<void> {
    let errors = 0;
    while (!this.stopping) {
      try {
        this.waker.clear();
        if (this.reconcilePending) {
          this.reconcilePending = false;
          await this.reconcileAfterOutage();
        }
        let claimed = 0;
        // New workflows: an admission starts beside the loop (admissionLane.ts), no more than this
        // executor can start soon (half its free slots while ready steps wait), so a burst spreads
        // over the executors. Prefetched steps waiting for a slot count as room: slots are about
        // to free, and a new workflow must not wait behind them.
        const admitted = this.admission.start(this.slots.free + this.slots.waiting, this.slots.backlog);
        let reachedDb = false;
        if (this.redrivePending) {
          await this.redrive();
          reachedDb = true;
        }
        const left = this.slots.claimable;
        // Only when ready steps may wait: an empty claim would hold the next admission back.
        if (left > 0 ? this.moreReady : this.toollessPending) {
          claimed = left > 0 ? await this.claimAndRun(left) : await this.claimToolless();
          reachedDb = true;
        }
        if (reachedDb) this.outage.succeeded();
        errors = 0;
        const busy = this.slots.claimable > 0 && (claimed > 0 || admitted > 0);
        if (!busy && !this.waker.isWoken && !this.stopping) {
          // Nothing woke us within the poll interval: look for missed work, new workflows included.
          if (!(await this.waker.wait(this.opts.pollIntervalMs))) this.admission.pending = this.toollessPending = this.redrivePending = this.moreReady = true;
          // Steps finishing together free their slots in the same tick: claim for all of them at once.
          await new Promise((r) => setImmediate(r));
        }
      } catch (err) {
        errors++;
        const delay = backoffMs(errors);
        // A lost connection is part of an outage, logged once; anything else is logged each time.
        if (!this.outage.failed(err, 'claim loop')) logRetriedFailure(this.deps.log, err, 'executor iteration failed; retrying', { delayMs: delay });
        if (this.outage.active) this.reconcilePending = true;
        // Wake-ups don't cut the backoff short (a finishing step would make it a busy loop); stop does.
        const until = Date.now() + delay;
        while (!this.stopping && Date.now() < until) {
          this.waker.clear();
          await this.waker.wait(until - Date.now());
        }
      }
    }
  }

  /** Runs a transaction that may claim the steps it creates (see runWithCreateClaims). */
  private withCreateClaims<T extends { claimed: CreatedClaim[] }>(fn: (claim: ClaimOnCreate | undefined) => Promise<T>, maxSlots = Infinity): Promise<T> {
    return runWithCreateClaims(this.claimOnCreate(maxSlots), fn, (claimed) => this.tasks.startClaimed(claimed));
  }

  /** Handles redrive requests (failed workflows set back to running); what they create is claimed like a transition's. */
  private async redrive(): Promise<void> {
    this.redrivePending = false;
    const r = await this.withCreateClaims((claim) => redriveRequested(this.tx, this.opts.admitBatch, claim), this.slots.free);
    if (r.handled >= this.opts.admitBatch) this.redrivePending = true;
    this.handleTx(r);
  }

  /** With every tool slot busy: claims readied gates, due timers and reported worker steps, which take no slot. */
  private async claimToolless(): Promise<number> {
    this.toollessPending = false;
    const claim = await claimSteps(this.claimDeps(), TOOLLESS_BATCH, { toollessOnly: true });
    if (claim.moreReady) this.toollessPending = true;
    else this.recheckSkipped(claim.rows.length);
    for (const id of claim.cancelledRunning) this.running.abort(id, new StepError('cancelled', 'step was cancelled'));
    for (const row of claim.rows) this.tasks.start(row);
    return claim.rows.length;
  }

  private claimDeps(): ClaimDeps {
    return claimDepsOf(this.core, this.fairness);
  }

  private async claimAndRun(free: number): Promise<number> {
    // Cleared before the claim: work announced while it runs sets it again.
    this.moreReady = false;
    // The slots are promised to this claim until its rows are started (in the same tick); gated
    // steps (keys, rates) only get those free now: a prefetched one would start after its token.
    const gatedFree = this.slots.free;
    const claim = await this.slots.reserving(free, () => claimSteps(this.claimDeps(), free, { gatedFree }));
    this.slots.backlog = claim.moreReady;
    if (claim.moreReady) this.moreReady = true;
    else this.recheckSkipped(claim.rows.length);
    if (claim.retryInMs !== undefined) this.wakeIn(claim.retryInMs);
    for (const id of claim.cancelledRunning) this.running.abort(id, new StepError('cancelled', 'step was cancelled'));
    for (const row of claim.rows) this.tasks.start(row, claim.fair);
    return claim.rows.length;
  }

  /** A claim that saw every row it could lock took fewer than were announced: look again soon. */
  private recheckSkipped(claimed: number): void {
    const ms = this.recheck.afterClaim(claimed);
    if (ms !== undefined) this.wakeIn(ms);
  }

  /** Lets a transaction claim the steps it creates (none while stopping; see createClaimsOf). */
  private claimOnCreate(maxSlots = Infinity): CreateClaims | undefined {
    return this.stopping ? undefined : createClaimsOf(this.core, this.slots, maxSlots);
  }

  private handleTx(r: TxResult): void {
    for (const id of r.cancelledRunning) this.running.abort(id, new StepError('cancelled', 'step was cancelled'));
    this.tasks.startClaimed(r.claimed);
    if (r.createdWork) this.wake();
    else this.slotFreed();
    if (r.readyInMs !== undefined) this.wakeIn(r.readyInMs);
  }

  /** Wakes the claim loop when a step created with a delay becomes ready (not at the next poll). */
  private wakeIn(ms: number): void {
    if (!this.stopping) this.waker.wakeIn(ms);
  }

  private scheduleWatchdog(delay: number): void {
    if (this.stopping) return;
    this.watchdogTimer = setTimeout(() => {
      this.watchdogRun = this.sweep().finally(() => this.scheduleWatchdog(this.opts.watchdogIntervalMs));
    }, delay);
  }

  /** One watchdog tick: leader duties, then this executor's own steps past their lease, cancelled or rescued. */
  async sweep(): Promise<void> {
    // Redrive requests are looked for at every sweep too, even while the loop never idles.
    this.redrivePending = true;
    try {
      const watchdog = { tx: this.tx, log: this.deps.log, isLeader: () => this.listener.ensureLeader(), onResult: (r: TxResult) => this.handleTx(r), retention: this.deps.retention };
      const report = await runWatchdogOnce(watchdog);
      const own = await rescueOwnStepsPastLease(watchdog, () => this.outcomes.stepIds());
      this.metrics.rescued('executor_dead', report.orphaned);
      this.metrics.rescued('lease_expired', report.lost + own);
      await abortStepsNoLongerOurs(this.pool, this.opts.executorId, this.running);
    } catch (err) {
      if (!this.outage.failed(err, 'watchdog')) this.deps.log.error({ err }, 'watchdog sweep failed');
    }
  }

  /** After an outage: hand back the steps a claim took whose answer never arrived (see recovery.ts). */
  private async reconcileAfterOutage(): Promise<void> {
    const deps = { pool: this.pool, executorId: this.opts.executorId, schema: this.opts.schema, log: this.deps.log };
    if ((await handBackStraysAfterOutage(deps, this.running, this.outcomes)) > 0) this.moreReady = true;
  }

  /**
   * Graceful stop: stop claiming, wait up to the grace period for running steps, then abort
   * the rest and hand them back as ready without spending an attempt.
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.moreReady = true;
    this.waker.close();
    this.admission.close();
    clearTimeout(this.watchdogTimer);
    await this.loopDone;
    await this.admission.idle();
    await this.cancelChecks.idle();
    await this.watchdogRun;
    const { pool, running, outcomes, heartbeat, listener } = this;
    const parts = { pool, running, outcomes, heartbeat, listener, executorId: this.opts.executorId, schema: this.opts.schema, log: this.deps.log };
    await drainAndClose(parts, options.graceMs ?? this.opts.shutdownGraceMs);
    this.deps.log.info({ executorId: this.opts.executorId }, 'executor stopped');
  }
}
