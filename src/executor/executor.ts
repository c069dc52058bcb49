/**
 * The executor: a small loop around the pure flow logic.
 *   wake (NOTIFY, own completions, poll) → admit new workflows → claim ready steps up to the
 *   free slots → run each as its own task → finish it in one transaction → repeat.
 * A failed iteration is logged and retried with backoff; it never kills the process. A lost
 * database is an outage (logged once when it starts and once when it ends): work in flight
 * fails and is retried, finished outcomes wait in the OutcomeQueue, and when the database is back
 * the steps a claim took without our hearing of it are handed back.
 *
 * This file builds the parts and wires them together (the folders below it: admission, claims,
 * steps, outcomes, transitions, wakeups, supervision, core); the rounds of the loop are
 * claimLoop.ts, the dependency bundles executorDeps.ts, the second half of a stop
 * supervision/shutdown.ts.
 */
import type pg from 'pg';
import { createPool, type PoolOptions } from '../db/connect.js';
import { nextStartAtInMs } from '../db/queries/startAt.js';
import { writeSizeCaps } from '../db/queries/sizeCaps.js';
import { writePriorityCaps } from '../db/queries/capacity.js';
import { writeActAsRules } from '../db/queries/actAsRules.js';
import { namingStatement, StepError } from '../errors.js';
import { resolveCaps } from '../flow/caps.js';
import { Listener } from './wakeups/listener.js';
import type { WakeupHint } from './wakeups/wakeupHint.js';
import { CancelChecks } from './wakeups/cancelChecks.js';
import { admitWorkflows } from './admission/admission.js';
import { LockDeferrals } from './core/lockDeferrals.js';
import { finishSteps, type TxDeps, type TxResult } from './outcomes/transactions.js';
import { DatabaseOutage } from './core/dbOutage.js';
import { Heartbeat } from './supervision/heartbeat.js';
import { OutcomeQueue } from './outcomes/outcomeQueue.js';
import type { ClaimOnCreate, CreatedClaim } from './core/txWriter.js';
import { abortStepsNoLongerOurs, recoverOrphans } from './supervision/recovery.js';
import { drainAndClose } from './supervision/shutdown.js';
import { RunningTasks } from './claims/runningTasks.js';
import { StepTasks } from './steps/stepTasks.js';
import { reportRecordedSignalWait } from './steps/stepReports.js';
import { runWithCreateClaims, Slots, type CreateClaims } from './claims/slots.js';
import { AdmissionLane } from './admission/admissionLane.js';
import { createClaimsOf, runStepDepsOf, txDepsOf, type ExecutorCore, type ExecutorDeps } from './executorDeps.js';
import { ClaimLoop, type LoopFlags } from './claimLoop.js';
import { Waker } from './wakeups/waker.js';
import { DeferredSignalRetry } from './wakeups/deferredSignalRetry.js';
import { readyDeferredSignalMatches } from './supervision/deferredSignals.js';
import { SkippedReadyRecheck } from './claims/skippedReadyRecheck.js';
import { ReportLookout } from './claims/reportLookout.js';
import { SignalPickup } from './claims/signalPickup.js';
import { SignalLane } from './claims/signalLane.js';
import { logRetriedFailure } from './loopErrors.js';
import { rescueOwnStepsPastLease, runWatchdogOnce } from './supervision/watchdog.js';
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
  /** What may be waiting (claimLoop.ts): set by wake-ups, cleared by the round that looks. */
  private readonly flags: LoopFlags = { moreReady: true, toollessPending: true, redrivePending: true, reconcilePending: false };
  /** The loop's rounds: admission started, redrives, claims (claimLoop.ts). */
  private readonly claimLoop: ClaimLoop;
  /** Readied signal waits to the outcome lane, beside the claim loop (signalLane.ts). */
  private readonly signalLane: SignalLane;
  private readonly slots: Slots;
  private readonly waker: Waker;
  /** Readied steps a claim may have skipped (locked by a client at that moment): looked for again soon. */
  private readonly recheck: SkippedReadyRecheck;
  /** Looks again soon after claiming reported worker steps or readied signal waits (they skip NOTIFYs while one waits). */
  private readonly reportLookout = new ReportLookout({ look: () => ((this.flags.toollessPending = true), this.wake()) });
  /** Signals that deferred a match past a held wait row: their matches are tried again soon (sql/0043). */
  private readonly deferredSignals = new DeferredSignalRetry({
    retry: () => readyDeferredSignalMatches({ pool: this.pool, schema: this.opts.schema, log: this.deps.log }, this.opts.admitBatch),
    onError: (err) => {
      if (!this.outage.failed(err, 'deferred signal matches')) this.deps.log.warn({ err }, 'trying deferred signal matches failed; the watchdog will');
    },
  });
  /** Cancellation wake-ups, acted on once the workflow's row confirms them. */
  private readonly cancelChecks: CancelChecks;
  private stopping = false;
  private started = false;
  /** Admission transactions beside the loop (admissionLane.ts); `pending`: new workflows may wait. */
  private readonly admission: AdmissionLane;
  /** New workflows the database refuses to change at all (admission.ts): left alone. */
  private readonly unadmittable = new Set<string>();
  /** New workflows whose admission met a lock held elsewhere: tried again after a backoff (admissionLocks.ts). */
  private readonly admissionDeferrals = new LockDeferrals();
  /** Fair admission's round-robin cursor over roles (admission.ts). */
  private readonly admissionTurns = { afterRole: '' };
  private loopDone: Promise<void> | undefined;
  private signalLaneDone: Promise<void> | undefined;
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
    this.waker = new Waker({ pollIntervalMs: opts.pollIntervalMs, onTimer: () => (this.flags.toollessPending = this.flags.moreReady = true) });
    this.outage = new DatabaseOutage({
      log: deps.log,
      onRecovered: () => {
        this.flags.reconcilePending = true;
        this.admission.pending = true;
        this.wake();
      },
    });
    const poolOpts: PoolOptions = {
      url: opts.databaseUrl,
      schema: opts.schema,
      role: 'executor',
      events: opts.emitEvents,
      max: opts.poolSize ?? Math.min(21, opts.concurrency + 3),
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
      parallel: Number(process.env.X_PAR ?? 2),
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
      admit: (limit, claimSlots) => namingStatement('admitWorkflows', () => this.withCreateClaims((claim) => admitWorkflows(this.tx, limit, claim, this.unadmittable, this.admissionTurns, this.admissionDeferrals), claimSlots)),
      nextStartAtInMs: () => nextStartAtInMs(this.pool),
      onAdmitted: (r) => {
        this.outage.succeeded();
        // First steps left ready: let finishing steps free slots for the claims (claimOnCreate).
        if (r.readyNow) this.flags.moreReady = this.slots.backlog = true;
        if (r.readyInMs !== undefined) this.wakeIn(r.readyInMs);
      },
      onError: (err) => {
        if (!this.outage.failed(err, 'admission')) logRetriedFailure(deps.log, err, 'admitting new workflows failed; retrying');
        if (this.outage.active) this.flags.reconcilePending = true;
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
        this.admission.pending = this.flags.redrivePending = true;
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
    const { flags, waker, admission, slots, running, tasks, outcomes, outage, recheck, reportLookout } = this;
    const signals = new SignalPickup({
      db: this.pool,
      record: (input, settled) => outcomes.add(input, settled),
      // Counted, traced and logged as a toolless step that ran (stepReports.ts).
      onRecorded: (wait, outcome) => reportRecordedSignalWait({ log: deps.log, metrics: this.metrics, tracing: this.tracing }, wait, outcome),
    });
    this.signalLane = new SignalLane({
      pickUp: (room) => signals.pickUp(room),
      room: () => slots.outcomeRoom,
      outage,
      logFailure: (err, delayMs) => logRetriedFailure(deps.log, err, 'looking for readied signal waits failed; retrying', { delayMs }),
      pollIntervalMs: opts.pollIntervalMs,
    });
    this.claimLoop = new ClaimLoop({
      core, tx: this.tx, flags, waker, admission, slots, running, tasks, outcomes, outage, recheck, reportLookout,
      stopping: () => this.stopping,
      withCreateClaims: (fn, maxSlots) => this.withCreateClaims(fn, maxSlots),
      handleTx: (r) => this.handleTx(r),
      wakeIn: (ms) => this.wakeIn(ms),
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
    // Who may cancel or ready another role's work (sql/0038).
    await writeActAsRules(this.pool, this.deps.clients, this.opts.executorId);
    await this.listener.start();
    try {
      await this.heartbeat.start();
    } catch (err) {
      await this.listener.close();
      throw err;
    }
    await recoverOrphans(this.tx, (r) => this.handleTx(r));
    this.loopDone = this.claimLoop.run();
    this.signalLaneDone = this.signalLane.run();
    this.scheduleWatchdog(0);
    this.deps.log.info(
      { executorId: this.opts.executorId, schema: this.opts.schema, concurrency: this.opts.concurrency },
      'executor started',
    );
  }

  /** Wakes the claim loop (new ready work, a free slot). */
  wake(): void {
    this.flags.moreReady = true;
    this.waker.wake();
  }

  /**
   * A slot came free. Claim again only if ready steps may be waiting: the last claim filled
   * every slot it asked for, or something announced new work since. Otherwise every finished
   * step would cost an empty claim.
   */
  private slotFreed(): void {
    if (this.flags.moreReady) this.wake();
    else if (this.admission.pending) this.waker.wake();
  }

  /** A NOTIFY on stepd_wakeup: a hint of where to look, never a fact (wakeupHint.ts). */
  private onWakeup(hint: WakeupHint): void {
    if (hint.kind === 'cancelled') return this.cancelChecks.note(hint.workflowId);
    if (hint.kind === 'signalDeferred') return this.deferredSignals.hinted();
    if (hint.kind === 'stepReady') {
      this.flags.toollessPending = true;
      this.signalLane.request();
      this.recheck.noteReadied();
      return this.wake();
    }
    // New workflows and redrives wake the loop for themselves, not the claims.
    if (hint.kind === 'redrive') this.flags.redrivePending = true;
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

  /** Runs a transaction that may claim the steps it creates (see runWithCreateClaims). */
  private withCreateClaims<T extends { claimed: CreatedClaim[] }>(fn: (claim: ClaimOnCreate | undefined) => Promise<T>, maxSlots = Infinity): Promise<T> {
    return runWithCreateClaims(this.claimOnCreate(maxSlots), fn, (claimed) => this.tasks.startClaimed(claimed));
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
    this.flags.redrivePending = true;
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

  /**
   * Graceful stop: stop claiming, wait up to the grace period for running steps, then abort
   * the rest and hand them back as ready without spending an attempt.
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.flags.moreReady = true;
    this.waker.close();
    this.reportLookout.close();
    this.signalLane.close();
    await this.deferredSignals.close();
    this.admission.close();
    clearTimeout(this.watchdogTimer);
    await this.loopDone;
    await this.signalLaneDone;
    await this.admission.idle();
    await this.cancelChecks.idle();
    await this.watchdogRun;
    const { pool, running, outcomes, heartbeat, listener } = this;
    const parts = { pool, running, outcomes, heartbeat, listener, executorId: this.opts.executorId, schema: this.opts.schema, log: this.deps.log };
    await drainAndClose(parts, options.graceMs ?? this.opts.shutdownGraceMs);
    this.deps.log.info({ executorId: this.opts.executorId }, 'executor stopped');
  }
}
