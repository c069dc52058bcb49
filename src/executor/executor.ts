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
import { findStepsNoLongerRunning, type ClaimedStep } from '../db/queries.js';
import { nextStartAtInMs } from '../db/queries/startAt.js';
import { StepError } from '../errors.js';
import type { CapsConfig, ClientsConfig } from '../configFile.js';
import { resolveCaps } from '../flow/caps.js';
import type { Logger } from '../logger.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { LimitPolicy } from '../tools/limits.js';
import { Listener, type WakeupPayload } from './listener.js';
import { runClaimedStep, type RunStepDeps, type StepPolicy } from './runStep.js';
import { stepProgressSink } from './stepProgress.js';
import { refuseReadyingIfNotAllowed } from './gateReadying.js';
import { runClaimedSubWorkflowStep } from './subWorkflows.js';
import { admitWorkflows, finishSteps, type TxDeps, type TxResult } from './transactions.js';
import { backoffMs, DatabaseOutage } from './dbOutage.js';
import { Heartbeat } from './heartbeat.js';
import { OutcomeQueue } from './outcomeQueue.js';
import { claimedRow, type ClaimOnCreate, type CreatedClaim } from './txWriter.js';
import { claimSteps, newFairClaimState, type ClaimDeps } from './claimSteps.js';
import { handBackRunning, handBackStrays, recoverOrphans } from './recovery.js';
import { RunningTasks, type RunningTask } from './runningTasks.js';
import { createClaims, Slots, type CreateClaims } from './slots.js';
import { StartAtAlarm } from './startAtAlarm.js';
import { Waker } from './waker.js';
import { runWatchdogOnce } from './watchdog.js';
import { redriveRequested } from './redrive.js';
import { WorkflowCache } from './workflowCache.js';
import { NO_METRICS, stepResultLabel, type ExecutorMetrics } from '../telemetry/executorMetrics.js';
import { NO_TRACING, type StepTrace, type StepTracing } from '../telemetry/stepTracing.js';
import type { Outcome } from './advance.js';

export { DEFAULT_EXECUTOR_OPTIONS, type ExecutorOptions } from './options.js';
import type { ExecutorOptions } from './options.js';

/** Readied gates and due timers claimed at once while every tool slot is busy. */
const TOOLLESS_BATCH = 32;
/** How long new workflows wait for a free slot before a full executor admits them unclaimed. */
const ADMIT_WAIT_MS = 100;

export interface ExecutorDeps {
  log: Logger;
  tools: ToolRegistry;
  permissions?: StepPolicy;
  /** Per-tool-pattern and per-user maximums of running steps. */
  limits?: LimitPolicy;
  /** Which users each database role may start workflows as (config `clients`). */
  clients?: ClientsConfig;
  /** The operator's caps (config `caps`); defaults in src/flow/caps.ts. */
  caps?: CapsConfig;
  random?: () => number;
  /** Where claims, outcome transactions and steps are counted (default: nowhere). */
  metrics?: ExecutorMetrics;
  /** Spans of steps, tool calls and ended workflows (default: none). */
  tracing?: StepTracing;
}

export class Executor {
  private readonly pool: pg.Pool;
  private readonly listener: Listener;
  private readonly cache: WorkflowCache;
  private readonly running: RunningTasks;
  private readonly tx: TxDeps;
  /** What running a step needs: the tools, the permission check, where progress goes. */
  private readonly runDeps: RunStepDeps;
  private readonly outcomes: OutcomeQueue;
  private readonly outage: DatabaseOutage;
  private readonly heartbeat: Heartbeat;
  private readonly metrics: ExecutorMetrics;
  private readonly tracing: StepTracing;
  /** Set when the database came back: check which running steps are really ours. */
  private reconcilePending = false;
  private readonly slots: Slots;
  private readonly waker: Waker;
  /** Wakes admission when the earliest delayed start (start_at) comes. */
  private readonly startAlarm = new StartAtAlarm(() => {
    this.admitPending = true;
    this.wake();
  });
  private readonly fairness = newFairClaimState();
  /** Whether readied gates or due timers may wait: claimed even when every tool slot is busy. */
  private toollessPending = true;
  /** Since when new workflows wait for a free slot of this executor (undefined: they don't). */
  private admitBlockedSince: number | undefined;
  private stopping = false;
  private started = false;
  /** Whether ready steps may be waiting that the last claim did not take. */
  private moreReady = true;
  /** Whether new workflows may be waiting: set by their NOTIFY, a poll tick, or a full batch. */
  private admitPending = true;
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
    this.waker = new Waker({ pollIntervalMs: opts.pollIntervalMs, onTimer: () => (this.toollessPending = true) });
    this.outage = new DatabaseOutage({
      log: deps.log,
      onRecovered: () => {
        this.reconcilePending = true;
        this.admitPending = true;
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
    const progressDeps = { pool: this.pool, executorId: opts.executorId, schema: opts.schema, emitEvents: opts.emitEvents, log: deps.log };
    const subDeps = { pool: this.pool, executorId: opts.executorId, schema: opts.schema, log: deps.log, caps: this.cache.compiler.caps };
    this.runDeps = {
      ...deps,
      progress: (row) => stepProgressSink(progressDeps, row),
      subWorkflow: (row, step) => runClaimedSubWorkflowStep(subDeps, row, step),
    };
    this.tx = {
      pool: this.pool,
      cache: this.cache,
      executorId: opts.executorId,
      schema: opts.schema,
      log: deps.log,
      random: deps.random ?? Math.random,
      emitEvents: opts.emitEvents,
      leaseGraceMs: opts.leaseGraceMs,
      clients: deps.clients,
      onWorkflowsEnded: this.tracing.enabled ? (ids) => this.tracing.workflowsEnded(this.pool, ids) : undefined,
    };
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
    this.slots = new Slots(opts.concurrency, () => this.outcomes.size, Math.max(opts.concurrency, opts.admitBatch));
    this.running = new RunningTasks({ log: deps.log, slots: this.slots, onEnded: () => this.slotFreed() });
    this.listener = new Listener({
      pool: poolOpts,
      schema: opts.schema,
      executorId: opts.executorId,
      log: deps.log,
      outage: this.outage,
      onWakeup: (p) => this.onWakeup(p),
      onReconnect: () => {
        this.admitPending = this.redrivePending = true;
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
      onPresumedDead: () => void this.abortStepsNoLongerOurs().catch(() => {}),
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
    if (this.moreReady || this.admitPending) this.wake();
  }

  private onWakeup(p: WakeupPayload): void {
    if (p.table === 'workflows' && p.status === 'cancelled') {
      const id = String(p.id);
      this.running.abortWorkflow(id, new StepError('cancelled', 'workflow was cancelled'));
      this.cache.forget(id);
      if (this.tracing.enabled) this.traceCancelled(id);
      return;
    }
    if (p.table === 'workflows' && p.status === 'running') this.redrivePending = true;
    else if (p.table === 'workflows') this.admitPending = true;
    else this.toollessPending = true;
    this.wake();
  }

  /** A workflow a client cancelled: the watchdog's leader records its workflow span (one executor does). */
  private traceCancelled(workflowId: string): void {
    void this.listener.ensureLeader().then(
      (leader) => leader && this.tracing.workflowsEnded(this.pool, [workflowId]),
      () => {},
    );
  }

  private abortTask(stepId: string, reason: Error): void {
    this.running.abort(stepId, reason);
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
        let admitted = 0;
        // New workflows first, so a backlog of ready steps never keeps them waiting, but no more
        // than this executor can start soon (half its free slots while ready steps wait), so a
        // burst spreads over the executors; then ready steps with the slots left.
        const free = this.freeSlots();
        const touchesDb = this.admitPending || free > 0;
        if (this.admitPending) admitted = await this.admit(free);
        if (this.redrivePending) await this.redrive();
        const left = this.freeSlots();
        if (left > 0) claimed = await this.claimAndRun(left);
        else if (this.toollessPending) claimed = await this.claimToolless();
        if (touchesDb || left > 0) this.outage.succeeded();
        errors = 0;
        const busy = this.freeSlots() > 0 && (claimed > 0 || admitted > 0);
        if (!busy && !this.waker.isWoken && !this.stopping) {
          // Nothing woke us within the poll interval: look for missed work, new workflows included.
          if (!(await this.waker.wait(this.opts.pollIntervalMs))) this.admitPending = this.toollessPending = this.redrivePending = true;
          // Steps finishing together free their slots in the same tick: claim for all of them at once.
          await new Promise((r) => setImmediate(r));
        }
      } catch (err) {
        errors++;
        const delay = backoffMs(errors);
        // A lost connection is part of an outage, logged once; anything else is logged each time.
        if (!this.outage.failed(err, 'claim loop')) this.deps.log.error({ err, delayMs: delay }, 'executor iteration failed; retrying');
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

  private freeSlots(): number {
    return this.slots.free;
  }

  /**
   * Runs a transaction that may claim the steps it creates, with the slots it may fill promised
   * to it until it is done, and starts what it claimed before giving the rest back: two
   * transactions (or a transaction and a claim) never count the same free slot.
   */
  private async withCreateClaims<T extends { claimed: CreatedClaim[] }>(fn: (claim: ClaimOnCreate | undefined) => Promise<T>, maxSlots = Infinity): Promise<T> {
    const claim = this.claimOnCreate(maxSlots);
    try {
      const r = await fn(claim?.handle);
      this.startClaimed(r.claimed);
      r.claimed = [];
      return r;
    } finally {
      // The started steps hold their slots now; what is still reserved goes back.
      claim?.settle();
    }
  }

  /**
   * Admits new workflows: no more than this executor can start now (half its free slots while
   * ready steps wait), so a burst spreads over the executors. With every slot busy, new
   * workflows wait up to ADMIT_WAIT_MS; then a batch is admitted without claiming anything
   * (their first steps become ready for any executor), so a full executor never keeps a new
   * workflow `new` for long, and never runs more than it can.
   */
  private async admit(free: number): Promise<number> {
    let limit: number;
    let slots: number;
    if (free > 0) {
      // A whole batch: the first steps are claimed as far as the slots allow (instant tools
      // always); the others are created ready, for this executor's next claim or another's.
      slots = this.slots.backlog ? Math.ceil(free / 2) : free;
      limit = this.opts.admitBatch;
    } else {
      this.admitBlockedSince ??= Date.now();
      const waited = Date.now() - this.admitBlockedSince;
      if (waited < ADMIT_WAIT_MS) {
        this.wakeIn(ADMIT_WAIT_MS - waited);
        return 0;
      }
      slots = 0;
      limit = this.opts.admitBatch;
    }
    this.admitBlockedSince = undefined;
    this.admitPending = false;
    const r = await this.withCreateClaims((claim) => admitWorkflows(this.tx, limit, claim), slots);
    if (r.readyNow) {
      this.moreReady = true;
      // First steps left ready: let finishing steps free slots for the claims (claimOnCreate).
      this.slots.backlog = true;
    }
    if (r.readyInMs !== undefined) this.wakeIn(r.readyInMs);
    if (r.admitted >= limit) this.admitPending = true;
    // Caught up: if a workflow waits for its start_at, be woken for it (not by a fast poll).
    else {
      const ms = await nextStartAtInMs(this.pool);
      if (ms !== undefined) this.startAlarm.setIn(ms);
    }
    return r.admitted;
  }

  /** Handles redrive requests (failed workflows set back to running); what they create is claimed like a transition's. */
  private async redrive(): Promise<void> {
    this.redrivePending = false;
    const r = await this.withCreateClaims((claim) => redriveRequested(this.tx, this.opts.admitBatch, claim), this.freeSlots());
    if (r.handled >= this.opts.admitBatch) this.redrivePending = true;
    this.handleTx(r);
  }

  /** With every tool slot busy: claims readied gates and due timers, which take no slot. */
  private async claimToolless(): Promise<number> {
    this.toollessPending = false;
    const claim = await claimSteps(this.claimDeps(), TOOLLESS_BATCH, { toollessOnly: true });
    if (claim.moreReady) this.toollessPending = true;
    for (const id of claim.cancelledRunning) this.abortTask(id, new StepError('cancelled', 'step was cancelled'));
    for (const row of claim.rows) this.startTask(row);
    return claim.rows.length;
  }

  private claimDeps(): ClaimDeps {
    return {
      pool: this.pool,
      cache: this.cache,
      executorId: this.opts.executorId,
      schema: this.opts.schema,
      leaseGraceMs: this.opts.leaseGraceMs,
      emitEvents: this.opts.emitEvents,
      log: this.deps.log,
      fairness: this.fairness,
      metrics: this.metrics,
      ...(this.deps.limits ? { limits: this.deps.limits } : {}),
    };
  }

  private async claimAndRun(free: number): Promise<number> {
    // Cleared before the claim: work announced while it runs sets it again.
    this.moreReady = false;
    // The slots are promised to this claim until its rows are started (in the same tick).
    const claim = await this.slots.reserving(free, () => claimSteps(this.claimDeps(), free));
    this.slots.backlog = claim.moreReady;
    if (claim.moreReady) this.moreReady = true;
    for (const id of claim.cancelledRunning) this.abortTask(id, new StepError('cancelled', 'step was cancelled'));
    for (const row of claim.rows) this.startTask(row);
    return claim.rows.length;
  }

  private startTask(row: ClaimedStep): void {
    // Gates, timers and instant tools (core.echo, core.noop) take no tool slot.
    const holdsSlot = row.tool !== null && !this.deps.tools.isInstant(row.tool);
    this.running.start(row.id, row.workflow_id, holdsSlot, (task) => this.measuredTask(row, task));
  }

  /** Runs the step's task inside its metrics and its trace span. */
  private async measuredTask(row: ClaimedStep, task: RunningTask): Promise<void> {
    const started = performance.now();
    this.metrics.stepStarted(row.tool, row.attempt);
    const span = this.tracing.startStep({ workflowId: row.workflow_id, stepId: row.id, stepName: row.name, attempt: row.attempt, tool: row.tool });
    let outcome: Outcome | undefined;
    try {
      outcome = await this.runTask(row, task, span);
    } finally {
      this.metrics.stepEnded(row.tool, (performance.now() - started) / 1000, outcome && stepResultLabel(outcome));
      span.end(outcome);
    }
  }

  /** Runs a claimed step and queues its outcome; returns it (undefined: no outcome from here). */
  private async runTask(row: ClaimedStep, task: RunningTask, trace: StepTrace): Promise<Outcome | undefined> {
    const log = this.deps.log;
    const started = Date.now();
    const wf = (await this.cache.load(this.pool, [row.workflow_id]).catch(() => new Map())).get(row.workflow_id);
    // A readied gate whose approvers or schema refuse the readying waits again: no outcome.
    const gate = wf?.flow.steps.get(row.name);
    if (gate?.kind === 'gate' && (await refuseReadyingIfNotAllowed(this.tx, row, gate))) return undefined;
    const runDeps = this.tracing.enabled ? { ...this.runDeps, trace } : this.runDeps;
    const outcome = await runClaimedStep(runDeps, row, wf?.flow.steps.get(row.name), this.cache.compiler.caps, task.controller.signal);
    // No outcome: a sub-workflow step started its child and waits for it (pending, no task).
    if (task.released || outcome === undefined) return undefined;
    const ms = Date.now() - started;
    if (outcome.status === 'done') log.info({ workflowId: row.workflow_id, stepId: row.id, step: row.name, attempt: row.attempt, ms }, 'step done');
    else log.info({ workflowId: row.workflow_id, stepId: row.id, step: row.name, attempt: row.attempt, ms, error: outcome.error }, 'step failed');
    // The slot is free once the tool is done: recording the outcome (batched with others) overlaps
    // with claiming and running the next steps. stop() waits for the queue to drain.
    void this.outcomes.push({ stepId: row.id, workflowId: row.workflow_id, guard: 'running', outcome });
    return outcome;
  }

  /**
   * Lets a transaction claim the steps it creates (none while stopping): up to the free slots,
   * half of them while ready steps wait (so they are not starved by the chains this executor
   * already runs), and never a step a configured limit applies to — those are claimed by the
   * claim, which counts every executor's running steps.
   */
  private claimOnCreate(maxSlots = Infinity): CreateClaims | undefined {
    if (this.stopping) return undefined;
    const limits = this.deps.limits;
    return createClaims(this.slots, {
      executorId: this.opts.executorId,
      maxSlots,
      // Steps a configured limit applies to are claimed by the claim, which counts every executor's.
      limited: (tool, user) => limits !== undefined && !limits.unlimited && limits.applies(tool, user),
      instant: (tool) => this.deps.tools.isInstant(tool),
    });
  }

  private startClaimed(claimed: CreatedClaim[]): void {
    for (const c of claimed) this.startTask(claimedRow(c, this.opts.executorId));
  }

  private handleTx(r: TxResult): void {
    for (const id of r.cancelledRunning) this.abortTask(id, new StepError('cancelled', 'step was cancelled'));
    this.startClaimed(r.claimed);
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

  /** One watchdog tick: leader duties, then this executor's own cancelled or rescued steps. */
  async sweep(): Promise<void> {
    // Redrive requests are looked for at every sweep too, even while the loop never idles.
    this.redrivePending = true;
    try {
      const report = await runWatchdogOnce({ tx: this.tx, log: this.deps.log, isLeader: () => this.listener.ensureLeader(), onResult: (r) => this.handleTx(r) });
      this.metrics.rescued('executor_dead', report.orphaned);
      this.metrics.rescued('lease_expired', report.lost);
      await this.abortStepsNoLongerOurs();
    } catch (err) {
      if (!this.outage.failed(err, 'watchdog')) this.deps.log.error({ err }, 'watchdog sweep failed');
    }
  }

  /** Aborts the tools of steps no longer running here: cancelled, or rescued from us as presumed dead. */
  private async abortStepsNoLongerOurs(): Promise<void> {
    const gone = await findStepsNoLongerRunning(this.pool, this.opts.executorId, this.running.ids());
    for (const id of gone) this.abortTask(id, new StepError('cancelled', 'step is no longer running here (cancelled or rescued)'));
  }

  /** After an outage: hand back the steps a claim took whose answer never arrived (see recovery.ts). */
  private async reconcileAfterOutage(): Promise<void> {
    await this.outcomes.exclusive(async () => {
      const deps = { pool: this.pool, executorId: this.opts.executorId, schema: this.opts.schema, log: this.deps.log };
      const ours = () => {
        const waiting = this.outcomes.stepIds();
        return (id: string) => this.running.has(id) || waiting.has(id);
      };
      if ((await handBackStrays({ ...deps, ours })) > 0) this.moreReady = true;
    });
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
    this.startAlarm.close();
    clearTimeout(this.watchdogTimer);
    await this.loopDone;
    await this.watchdogRun;
    let leftRunning = false;
    const grace = options.graceMs ?? this.opts.shutdownGraceMs;
    if (this.running.size > 0) {
      this.deps.log.info({ running: this.running.size, graceMs: grace }, 'waiting for running steps');
      await this.running.doneWithin(grace);
    }
    if (this.running.size > 0) {
      const ids = this.running.releaseAll(new StepError('shutdown', 'executor is shutting down', { retryable: true }));
      const released = await handBackRunning({ pool: this.pool, executorId: this.opts.executorId, schema: this.opts.schema, log: this.deps.log }, ids);
      if (released < ids.length) leftRunning = true;
      await this.running.allDone();
    }
    // Outcomes wait for the database as long as the grace period allows; then the leader
    // rescues their steps (the row of this executor stays, so it goes stale and counts as dead).
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.outcomes.idle(), new Promise((r) => (timer = setTimeout(r, Math.max(grace, 1_000))))]);
    clearTimeout(timer);
    if (this.outcomes.unrecorded > 0) {
      leftRunning = true;
      this.outcomes.abandon();
    }
    await this.outcomes.idle();
    if (leftRunning) await this.heartbeat.pause();
    else await this.heartbeat.stop();
    await this.listener.close();
    await this.pool.end();
    this.deps.log.info({ executorId: this.opts.executorId }, 'executor stopped');
  }
}
