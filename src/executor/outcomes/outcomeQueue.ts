/**
 * Finished steps wait here for their outcome to be recorded; a drain takes the outcomes waiting
 * and records them in one transaction, so under load many steps share a commit. Up to `parallel`
 * drains record at once (two by default), each on its own connection, and never two batches
 * with outcomes of the same workflow: while one batch waits for its commit (or for the CPU, on a
 * busy machine) the next is already being recorded, as two executors would. A batch is taken
 * round-robin across roles and sized to take about 100 ms (outcomeLanes.ts), so one role's heavy
 * outcomes never keep another's waiting for long.
 *
 * When the database is unreachable the batch is kept and retried with backoff for as long as it
 * takes (outcomes finishing meanwhile join it): a restart or an outage loses no outcome. Each
 * finish is fenced by `status = 'running' AND executor_id`, so retrying a batch whose COMMIT
 * went through but whose answer was lost records nothing twice. A row another transaction holds
 * never counts as a failure: the outcome waits in the alone lane for as long as it is held, and
 * keeps its step's lease meanwhile (stepIds(): the watchdog leaves steps whose outcome waits
 * here). Other failures are retried a few times; after that the step's lease runs out and the
 * watchdog retries it. A readied signal wait (guard `signalled`) has no lease: one not recorded
 * stays ready, and the next signal pickup, here or on another executor, records it (notRecorded.ts
 * says which in its log line).
 */
import type { Logger } from '../../logger.js';
import type { ExecutorMetrics } from '../../telemetry/executorMetrics.js';
import { isLockNotAvailable } from '../../errors.js';
import { backoffMs } from '../core/dbOutage.js';
import { BatchPace } from '../core/batchPace.js';
import { OutcomeLanes } from './outcomeLanes.js';
import { logNotRecorded } from './notRecorded.js';
import type { FinishInput, TxResult } from './transactions.js';

export interface OutcomeQueueOptions {
  record: (inputs: FinishInput[]) => Promise<TxResult>;
  onResult: (result: TxResult) => void;
  /** Told of each failure; returns true for a lost connection (kept and retried without limit). */
  onFailure?: (err: unknown) => boolean;
  /** Told after each batch that was recorded. */
  onRecorded?: () => void;
  log: Logger;
  /** Told how long each recording transaction took and how many outcomes it recorded. */
  metrics?: ExecutorMetrics;
  maxBatch?: number;
  /** Attempts for failures other than a lost connection. */
  maxAttempts?: number;
  /**
   * The lane for outcomes a batch handed back (TxResult.deferred: a workflow or step row locked
   * elsewhere, or heavy to settle): one workflow per transaction, beside the main drain, so they never hold
   * the other outcomes behind them. Set only on the queue the main one creates for them.
   */
  alone?: boolean;
  /** Batches recorded at once (default 2; the alone lane records one at a time). */
  parallel?: number;
}

const NOTHING = (_recorded: boolean): void => {};

/** What one recording transaction should take, roughly (BatchPace). */
const OUTCOME_BATCH_TARGET_MS = 100;

/** How long the alone lane pauses before asking again for a row held elsewhere, when nothing else waits. */
const HELD_RETRY_MS = 250;

interface Entry {
  input: FinishInput;
  /** Told once: whether this executor recorded the outcome (false: given up on, or no longer ours). */
  resolve: (recorded: boolean) => void;
}

/** One drain in progress: the batch it is recording (empty between batches). */
interface Drain {
  batch: Entry[];
}

export class OutcomeQueue {
  private readonly pending: Entry[] = [];
  /** The drains in progress, each with the batch it is recording. */
  private readonly drains = new Map<Drain, Promise<void>>();
  /** The recordings in flight; each is removed as soon as it has settled (never while retrying). */
  private readonly recordings = new Set<Promise<void>>();
  private readonly parallel: number;
  private gate: Promise<void> | undefined;
  private abandoned = false;
  /** The drains' waits in progress (outage backoff, retries), cut short by abandon(). */
  private readonly stopWaiting = new Set<() => void>();
  /** Where deferred outcomes go (see OutcomeQueueOptions.alone). */
  private readonly side: OutcomeQueue | undefined;
  private readonly pace: BatchPace;
  private readonly lanes = new OutcomeLanes();

  constructor(private readonly opts: OutcomeQueueOptions) {
    this.side = opts.alone ? undefined : new OutcomeQueue({ ...opts, alone: true, parallel: 1 });
    this.pace = new BatchPace(opts.maxBatch ?? 500, OUTCOME_BATCH_TARGET_MS);
    this.parallel = opts.alone ? 1 : Math.max(1, opts.parallel ?? 2);
  }

  /** Outcomes waiting for their turn (not counting the batch being recorded), deferred ones included. */
  get size(): number {
    return this.pending.length + (this.side?.unrecorded ?? 0);
  }

  /** Outcomes not recorded yet, the batch being recorded included. */
  get unrecorded(): number {
    let recording = 0;
    for (const d of this.drains.keys()) recording += d.batch.length;
    return this.pending.length + recording + (this.side?.unrecorded ?? 0);
  }

  /** The steps whose outcome is not recorded yet: still `running` in the database, but done here (they keep their lease). */
  stepIds(): Set<string> {
    const ids = new Set(this.pending.map((e) => e.input.stepId));
    for (const d of this.drains.keys()) for (const e of d.batch) ids.add(e.input.stepId);
    for (const id of this.side?.stepIds() ?? []) ids.add(id);
    return ids;
  }

  /**
   * Resolves once the outcome is recorded (or given up on), to whether this executor recorded it:
   * false for one given up on, or one its guard refused (recorded elsewhere first, no longer
   * ours). Never rejects.
   */
  push(input: FinishInput): Promise<boolean> {
    return new Promise((resolve) => this.add(input, resolve));
  }

  /** Queues an outcome; `settled` is told once, when it is recorded or given up on, whether this executor recorded it (see push). */
  add(input: FinishInput, settled: (recorded: boolean) => void = NOTHING): void {
    if (this.abandoned) {
      logNotRecorded(this.opts.log, 'stopping', [input]);
      return settled(false);
    }
    this.pending.push({ input, resolve: settled });
    // Another drain only while every one running is recording already (one that is about to take
    // a batch takes this outcome too).
    if (this.drains.size < this.parallel && this.everyDrainRecording()) {
      const drain: Drain = { batch: [] };
      this.drains.set(drain, this.drain(drain).finally(() => this.drains.delete(drain)));
    }
  }

  /** Whether every drain in progress has a batch (none is about to take one). */
  private everyDrainRecording(): boolean {
    for (const d of this.drains.keys()) if (d.batch.length === 0) return false;
    return true;
  }

  /** Waits until everything pushed so far is recorded (or given up on). */
  async idle(): Promise<void> {
    while (this.drains.size > 0 || (this.side?.drains.size ?? 0) > 0) {
      await Promise.all(this.drains.values());
      await this.side?.idle();
    }
  }

  /**
   * Runs `fn` while no batch is being recorded and none starts: what `fn` reads of this
   * executor's running steps is then not changed under it by a recording transaction.
   */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    // The alone lane is not waited for: its transactions claim no steps (see executor.ts), and a
    // long one there (a heavy settle, a workflow locked elsewhere) must not hold this back.
    while (this.gate) await this.gate;
    let open: () => void = () => {};
    this.gate = new Promise((r) => (open = r));
    try {
      while (this.recordings.size > 0) await Promise.all(this.recordings);
      return await fn();
    } finally {
      this.gate = undefined;
      open();
    }
  }

  /** Stops retrying (shutdown with the database away): what is left is the watchdog's to retry (a signal wait's, the next pickup's). */
  abandon(): void {
    this.side?.abandon();
    this.abandoned = true;
    for (const stop of [...this.stopWaiting]) stop();
  }

  private async drain(drain: Drain): Promise<void> {
    const maxBatch = this.opts.maxBatch ?? 500;
    const maxAttempts = this.opts.maxAttempts ?? 5;
    // Let outcomes finishing in the same tick join the first batch.
    await new Promise((r) => setImmediate(r));
    for (;;) {
      drain.batch = this.opts.alone ? this.takeOneWorkflow(maxBatch) : this.takeBatch(this.pace.size(), drain);
      // Nothing left that no other drain's batch has a workflow of: those drains take the rest.
      if (drain.batch.length === 0) return;
      let deferred = new Map<string, FinishInput>();
      let recorded: ReadonlySet<string> = new Set<string>();
      let failures = 0;
      let lostConnections = 0;
      let heldElsewhere = false;
      while (!this.abandoned) {
        while (this.gate) await this.gate;
        const recordStart = performance.now();
        const recording = this.opts.record(drain.batch.map((b) => b.input));
        const settled = recording.then(
          () => {},
          () => {},
        );
        this.recordings.add(settled);
        try {
          const result = await recording;
          this.recordings.delete(settled);
          this.opts.metrics?.outcomesRecorded((performance.now() - recordStart) / 1000, result.recorded.size);
          this.pace.recorded(drain.batch.length, performance.now() - recordStart);
          this.opts.onRecorded?.();
          this.opts.onResult(result);
          deferred = new Map((result.deferred ?? []).map((d) => [d.stepId, d]));
          recorded = result.recorded;
          break;
        } catch (err) {
          this.recordings.delete(settled);
          const ids = drain.batch.map((b) => b.input.stepId);
          if (this.opts.alone && isLockNotAvailable(err)) {
            // Its workflow's row is held elsewhere: the other workflows waiting here go first.
            this.opts.log.debug({ stepIds: ids }, 'workflow row held by another transaction; recording these outcomes after the others');
            heldElsewhere = true;
            break;
          }
          if (this.opts.onFailure?.(err)) {
            // The database is away: keep the batch (outcomes finishing meanwhile join it) and wait.
            lostConnections++;
            this.opts.log.debug({ stepIds: ids, attempt: lostConnections }, 'outcomes not recorded yet: database unreachable; retrying');
            if (drain.batch.length < maxBatch) drain.batch.push(...this.takeBatch(maxBatch - drain.batch.length, drain));
            await this.wait(backoffMs(lostConnections));
            continue;
          }
          if (++failures >= maxAttempts) {
            logNotRecorded(this.opts.log, 'failed', drain.batch.map((b) => b.input), err);
            break;
          }
          this.opts.log.warn({ err, stepIds: ids, attempt: failures }, 'recording step outcomes failed; retrying');
          await this.wait(50 * 2 ** failures);
        }
      }
      if (heldElsewhere && !this.abandoned) {
        const again = drain.batch;
        drain.batch = [];
        this.pending.push(...again);
        // Nothing else waits: pause before asking for the row again.
        if (this.pending.length === again.length) await this.wait(HELD_RETRY_MS);
        continue;
      }
      if (this.abandoned && drain.batch.length + this.pending.length > 0) {
        // Not the batch's recorded outcomes (abandoned while it committed), nor its deferred ones (the alone lane says).
        const left = [...drain.batch.filter((b) => !recorded.has(b.input.stepId) && !deferred.has(b.input.stepId)), ...this.pending];
        if (left.length > 0) logNotRecorded(this.opts.log, 'stopping', left.map((b) => b.input));
        drain.batch.push(...this.pending.splice(0));
      }
      const done = drain.batch;
      drain.batch = [];
      for (const b of done) {
        const later = deferred.get(b.input.stepId);
        if (later && this.side) void this.side.push(later).then(b.resolve);
        else b.resolve(recorded.has(b.input.stepId));
      }
    }
  }

  /**
   * The next batch of `drain`: up to `max` outcomes, round-robin across lanes (OutcomeLanes), of
   * workflows no other drain is recording (their outcomes wait for that drain's next batch).
   */
  private takeBatch(max: number, drain: Drain): Entry[] {
    const busy = new Set<string>();
    for (const d of this.drains.keys()) if (d !== drain) for (const e of d.batch) busy.add(e.input.workflowId);
    if (busy.size === 0) return this.lanes.take(this.pending, max);
    const free = this.pending.filter((e) => !busy.has(e.input.workflowId));
    if (free.length === 0) return [];
    const taken = new Set(this.lanes.take(free, max));
    const kept = this.pending.filter((e) => !taken.has(e));
    this.pending.splice(0, this.pending.length, ...kept);
    return [...taken];
  }

  /** The next outcomes of the oldest waiting workflow (the alone lane records one workflow at a time). */
  private takeOneWorkflow(max: number): Entry[] {
    if (this.pending.length === 0) return [];
    const workflowId = this.pending[0]!.input.workflowId;
    const taken: Entry[] = [];
    for (let i = 0; i < this.pending.length && taken.length < max; ) {
      if (this.pending[i]!.input.workflowId === workflowId) taken.push(...this.pending.splice(i, 1));
      else i++;
    }
    return taken;
  }

  /** Waits `ms`, or less if the queue is abandoned meanwhile. */
  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.stopWaiting.delete(finish);
        resolve();
      };
      const timer = setTimeout(finish, ms);
      this.stopWaiting.add(finish);
    });
  }
}
