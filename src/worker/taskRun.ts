/**
 * One task in a worker, from take to report. The token is held while the lease is: the lease is
 * extended every `heartbeatMs` (extend_task), and kept locally from when each call was sent, so
 * the worker never believes it holds a lease the database may already have given away. When the
 * lease is refused, runs out without an extension, or the workflow is cancelled, `ctx.signal` is
 * aborted and nothing is reported (the token is no longer ours). Otherwise the outcome is reported
 * exactly once: finish_task or fail_task, tried again only when the connection failed (the token
 * fences a second arrival, so a retry can never record it twice), never after a refusal.
 */
import type { Queryable } from '../db/queries/common.js';
import { extendTaskWithToken, failTaskWithToken, finishTaskWithToken, progressTaskWithToken, type WorkerTask } from '../db/queries/workerContract.js';
import { coerceError, StepError, type ErrorData } from '../errors.js';
import { backoffMs } from '../executor/core/dbOutage.js';
import { ProgressThrottle } from '../executor/steps/progressThrottle.js';
import type { Logger } from '../logger.js';
import { isTransient } from './transient.js';
import { normalizeProgress, parseToolArgs, type FunctionTool, type FunctionToolProgress } from '../tools/functionTool.js';

export interface TaskRunDeps {
  db: Queryable;
  schema: string;
  log: Logger;
  leaseMs: number;
  heartbeatMs: number;
  /** Records the result (default: finish_task on `db`; the worker shares a FinishBatch between its tasks). */
  finish?: (task: WorkerTask, result: unknown) => Promise<void>;
  /** At most one progress write per task per this many ms (default 250). */
  progressIntervalMs?: number;
  now?: () => number;
}

/** Why a task stopped before its tool returned: each is the reason its signal carries. */
type StopReason = 'cancelled' | 'lease_lost' | 'timeout' | 'worker_stopped';

/**
 * How a task ended, for the worker's bookkeeping and tests. `handed_back`: the worker stopped
 * before the tool started; reported as a `lost` attempt, which the executor retries at once
 * without spending `retry.maxAttempts` (handedBackError).
 */
export type TaskEnd = 'finished' | 'failed' | 'handed_back' | 'refused' | 'cancelled' | 'lease_lost' | 'unreported';

export class TaskRun {
  readonly task: WorkerTask;
  readonly #deps: TaskRunDeps;
  readonly #tool: FunctionTool<unknown, unknown>;
  readonly #controller = new AbortController();
  readonly #now: () => number;
  #leaseUntil: number;
  #stopReason: StopReason | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #leaseTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #extending: Promise<void> | undefined;
  #reported = false;
  #progress: ProgressThrottle<FunctionToolProgress>;

  /** `takenAt`: when the take_tasks call was sent (the lease counts from no later than that). */
  constructor(task: WorkerTask, tool: FunctionTool<unknown, unknown>, takenAt: number, deps: TaskRunDeps) {
    this.task = task;
    this.#tool = tool;
    this.#deps = deps;
    this.#now = deps.now ?? Date.now;
    this.#leaseUntil = takenAt + deps.leaseMs;
    this.#progress = new ProgressThrottle<FunctionToolProgress>({
      intervalMs: deps.progressIntervalMs ?? 250,
      write: (value) => this.#writeProgress(value),
    });
  }

  get workflowId(): string {
    return this.task.workflowId;
  }

  /**
   * Runs the tool and reports its outcome (at most once). Never rejects. `toolReturned` is called
   * once, when the tool has returned or thrown (or was not run): the worker's slot is free from
   * then on, while the report is on its way.
   */
  async run(toolReturned: () => void = () => {}): Promise<TaskEnd> {
    if (this.#now() >= this.#leaseUntil) {
      toolReturned();
      return this.#end('lease_lost', 'the lease ran out before the task started: not run');
    }
    this.hold();
    let outcome: { result: unknown } | { error: ErrorData } = { result: null };
    // Stopped while it waited for a slot (cancelled, lease lost, timed out, worker stopping): not
    // run; the reason decides below what is reported.
    const started = this.#stopReason === undefined;
    if (!started) toolReturned();
    else outcome = await this.#runTool(toolReturned);
    await this.#progress.close();
    await this.#extending;
    const reason = this.#stopReason;
    if (reason === 'cancelled') return this.#end('cancelled', 'the workflow was cancelled: nothing reported');
    if (reason === 'lease_lost') return this.#end('lease_lost', 'the lease was lost: nothing reported (another worker may take the task)');
    if (reason === 'worker_stopped' && !started) return this.#handBack();
    if (reason === 'timeout') outcome = { error: timeoutError(this.task).toJSON() };
    if (reason === 'worker_stopped') outcome = { error: new StepError('worker_stopped', 'the worker stopped before the tool returned', { retryable: true }).toJSON() };
    return this.#report(outcome);
  }

  async #runTool(toolReturned: () => void): Promise<{ result: unknown } | { error: ErrorData }> {
    try {
      const args = parseToolArgs(this.task.tool, this.#tool, this.task.args);
      const result = await this.#tool.run(args, {
        workflowId: this.task.workflowId,
        stepId: this.task.stepId,
        attempt: this.task.attempt,
        user: this.task.user,
        idempotencyKey: this.task.idempotencyKey,
        signal: this.#controller.signal,
        progress: (p) => {
          const value = normalizeProgress(p);
          if (value && this.#stopReason === undefined) this.#progress.push(value);
        },
      });
      return { result: result === undefined ? null : result };
    } catch (err) {
      return { error: coerceError(err).toJSON() };
    } finally {
      this.#clearTimers();
      toolReturned();
    }
  }

  /**
   * Keeps the task's lease from now on (heartbeats, the lease and deadline timers) though its tool
   * has not started: a task taken ahead waits for a slot as safely as a running one. Idempotent;
   * run() calls it.
   */
  hold(): void {
    if (this.#heartbeat !== undefined || this.#stopReason !== undefined || this.#reported) return;
    this.#armLeaseTimer();
    this.#heartbeat = setInterval(() => void this.checkLease(), this.#deps.heartbeatMs);
    if (this.task.deadline) {
      const ms = this.task.deadline.getTime() - this.#now();
      this.#deadlineTimer = setTimeout(() => this.#stop('timeout'), Math.max(0, ms));
    }
  }

  /**
   * The worker stops: a running tool is aborted (after the stop's grace) and reported as a
   * retryable `worker_stopped` failure; a task still waiting for a slot is handed back (run()).
   */
  abortForStop(): void {
    this.#stop('worker_stopped');
  }

  /** Extends the lease now (a heartbeat, or a hint that the workflow may have been cancelled). */
  checkLease(): Promise<void> {
    if (this.#stopReason !== undefined || this.#reported) return Promise.resolve();
    this.#extending ??= this.#extend().finally(() => (this.#extending = undefined));
    return this.#extending;
  }

  async #extend(): Promise<void> {
    const sentAt = this.#now();
    try {
      const answer = await extendTaskWithToken(this.#deps.db, this.#deps.schema, this.task, this.#deps.leaseMs);
      if (this.#stopReason !== undefined || this.#reported) return;
      if (answer === 'cancelled') return this.#stop('cancelled');
      this.#leaseUntil = Math.max(this.#leaseUntil, sentAt + this.#deps.leaseMs);
      this.#armLeaseTimer();
    } catch (err) {
      // A connection that failed says nothing about the lease: the next beat tries again, and the
      // lease timer stops the tool should none get through in time. A refusal is final.
      if (isTransient(err)) {
        this.#deps.log.warn({ err, stepId: this.task.stepId }, 'could not extend the lease (database unreachable); trying again');
        return;
      }
      if (this.#reported) return;
      this.#deps.log.info({ stepId: this.task.stepId, reason: (err as Error).message }, 'the lease was refused: stopping the task');
      this.#stop('lease_lost');
    }
  }

  #armLeaseTimer(): void {
    clearTimeout(this.#leaseTimer);
    this.#leaseTimer = setTimeout(() => this.#stop('lease_lost'), Math.max(0, this.#leaseUntil - this.#now()));
  }

  #stop(reason: StopReason): void {
    if (this.#stopReason !== undefined || this.#reported) return;
    this.#stopReason = reason;
    this.#clearTimers();
    const message = {
      cancelled: 'the workflow was cancelled',
      lease_lost: 'the task\'s lease was lost (another worker may take it)',
      timeout: 'the step timed out',
      worker_stopped: 'the worker is stopping',
    }[reason];
    this.#controller.abort(reason === 'timeout' ? timeoutError(this.task) : new StepError(reason, message, { retryable: reason !== 'cancelled' }));
  }

  #clearTimers(): void {
    clearInterval(this.#heartbeat);
    clearTimeout(this.#leaseTimer);
    clearTimeout(this.#deadlineTimer);
  }

  async #report(outcome: { result: unknown } | { error: ErrorData }): Promise<TaskEnd> {
    if (this.#reported) return 'unreported';
    this.#reported = true;
    if ('result' in outcome) {
      try {
        JSON.stringify(outcome.result);
      } catch (err) {
        outcome = { error: new StepError('bad_result', `${this.task.tool} returned a value that is not JSON: ${(err as Error).message}`).toJSON() };
      }
    }
    const send = 'result' in outcome
      ? () => (this.#deps.finish ?? ((task, result) => finishTaskWithToken(this.#deps.db, this.#deps.schema, task, result)))(this.task, (outcome as { result: unknown }).result)
      : () => failTaskWithToken(this.#deps.db, this.#deps.schema, this.task, (outcome as { error: ErrorData }).error);
    let tries = 0;
    // Past the lease, another worker may hold the task; the token refuses us then, so trying is
    // still safe, but a report that has not got through a whole lease later is given up.
    const giveUpAt = Math.max(this.#leaseUntil, this.#now()) + this.#deps.leaseMs;
    for (;;) {
      try {
        await send();
        return this.#end('result' in outcome ? 'finished' : 'failed');
      } catch (err) {
        if (!isTransient(err)) {
          // After a lost connection the first report may have been recorded: this is its refusal.
          return this.#end('refused', `the report was refused (${(err as Error).message}): the task is no longer ours`);
        }
        if (this.#now() >= giveUpAt) return this.#end('unreported', 'the database stayed unreachable: the outcome is not reported (the task will be retaken)');
        await new Promise((r) => setTimeout(r, backoffMs(++tries)));
      }
    }
  }

  /** Reports a task the worker never started as a lost attempt: retried at once, no `retry.maxAttempts` spent. */
  async #handBack(): Promise<TaskEnd> {
    const end = await this.#report({ error: handedBackError().toJSON() });
    return end === 'failed' ? this.#end('handed_back', 'the worker stopped before the task started: handed back as a lost attempt') : end;
  }

  async #writeProgress(value: FunctionToolProgress): Promise<void> {
    try {
      if ((await progressTaskWithToken(this.#deps.db, this.#deps.schema, this.task, value)) === 'cancelled') this.#stop('cancelled');
    } catch (err) {
      this.#deps.log.debug({ err, stepId: this.task.stepId }, 'progress not written');
    }
  }

  #end(end: TaskEnd, message?: string): TaskEnd {
    this.#clearTimers();
    if (message) this.#deps.log.info({ stepId: this.task.stepId, workflowId: this.task.workflowId, tool: this.task.tool, end }, message);
    return end;
  }
}

/** The step passed its deadline (the flow's timeout): retryable, like an executor-run step's timeout. */
function timeoutError(task: WorkerTask): StepError {
  return new StepError('timeout', `the step passed its deadline (${task.deadline?.toISOString() ?? 'unknown'})`, { retryable: true, details: { deadline: task.deadline } });
}

/**
 * A task handed back unstarted. The contract has no call that gives a token back (docs/library.md),
 * so it fails the attempt as `lost`: the platform's failure, not the step's, which the executor
 * retries at once without spending `retry.maxAttempts` (bounded by `retry.maxLost` instead).
 */
function handedBackError(): StepError {
  return new StepError('lost', 'the worker stopped before the task started: handed back, not run', { retryable: true, details: { started: false } });
}
