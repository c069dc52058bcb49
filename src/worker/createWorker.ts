/**
 * `createWorker()`: serves worker tools over the SQL worker contract (DESIGN.md §4b). A small
 * loop: take up to the free slots (take_tasks), run each task (taskRun.ts), wait for a wake-up
 * (LISTEN on stepd_tasks; taskWakeups.ts) or the poll, which backs off while nothing comes and
 * is all there is when LISTEN is unavailable (PgBouncer in transaction mode). A failed take is
 * logged and retried with back-off (a database restart, a pooler without a server); the loop
 * never dies of it. A few tasks are taken ahead of a free slot (`prefetch`), so a slot that frees
 * starts the next task without waiting for a take; results ready at once are reported in one
 * call (finishBatch.ts). `stop()` is two-stage, as the executor's: stop taking, hand back the
 * tasks taken ahead that wait for a slot (as `lost` attempts: retried at once, no attempt of
 * `retry.maxAttempts` spent), let running tasks finish for a grace period, then abort them
 * (reported as retryable `worker_stopped` failures).
 */
import os from 'node:os';
import pg from 'pg';
import { assertSchemaName } from '../db/connect.js';
import { finishTasksWithTokens, finishTaskWithToken, takeTasks, type WorkerTask } from '../db/queries/workerContract.js';
import { backoffMs } from '../executor/core/dbOutage.js';
import { Waker } from '../executor/wakeups/waker.js';
import { StepError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { stopOnSignals } from '../stopOnSignals.js';
import { checkFunctionTools, type FunctionTool, type FunctionTools, type TypedFunctionTools } from '../tools/functionTool.js';
import { FinishBatch } from './finishBatch.js';
import { TaskRun, type TaskEnd } from './taskRun.js';
import { TaskWakeups } from './taskWakeups.js';

export interface WorkerOptions<Args extends Record<string, unknown> = Record<string, unknown>> {
  /** The PostgreSQL (or PgBouncer) to connect to, as a role that is a member of `<schema>_worker`. */
  databaseUrl: string;
  /** The tools this worker serves: `{ "billing.charge": { input?: zodSchema, run: async (args, ctx) => result } }`. */
  tools: TypedFunctionTools<Args>;
  /** Tasks run at once (default 10). */
  concurrency?: number;
  /**
   * Tasks taken ahead of a free slot (default: a quarter of `concurrency`, rounded down; 0 for
   * concurrency below 4). A slot that frees starts one of them at once instead of waiting for a
   * take's round trip; they are held (heartbeats, cancellation, deadline) from the take on.
   */
  prefetch?: number;
  /** The schema of the stepd tables (default: $STEPD_SCHEMA, else "stepd"). */
  schema?: string;
  /** How long a take or an extension holds a task (default 30 s); heartbeats extend it every `heartbeatMs`. */
  leaseMs?: number;
  /** Default: a third of the lease. */
  heartbeatMs?: number;
  /**
   * Wake-ups by LISTEN (needs a session connection): true, false (poll only: PgBouncer in
   * transaction mode), or 'auto' (default): LISTEN when a probe shows notifications arrive.
   */
  listen?: boolean | 'auto';
  /** The longest wait between two takes when idle (default 1 s); polling backs off up to it. */
  pollIntervalMs?: number;
  /** The first wait of the back-off after a take that found nothing (default 25 ms). */
  minPollIntervalMs?: number;
  /** How long stop() lets running tasks finish before aborting them (default 30 s). */
  shutdownGraceMs?: number;
  /** Stop gracefully on the first SIGTERM/SIGINT, exit at once on a second (default false). */
  handleSignals?: boolean;
  /** Connections for reports and heartbeats (default: concurrency + 1, at most 10); takes have one more of their own. */
  poolSize?: number;
  /** A pino logger (default: JSON lines on stderr at $STEPD_LOG_LEVEL, else "info"). */
  logger?: Logger;
  /** Told how each task ended (tests and metrics). */
  onTaskEnd?: (task: WorkerTask, end: TaskEnd) => void;
}

export interface Worker {
  /** Resolves once the worker has set up its wake-ups and its first take got through. */
  readonly ready: Promise<void>;
  /** Tools running now (a task whose report is on its way no longer counts). */
  readonly running: number;
  /** Whether LISTEN wake-ups arrive (else the worker polls). */
  readonly listening: boolean;
  /** Stops taking, lets running tasks finish for `graceMs` (default shutdownGraceMs), aborts the rest, closes. Idempotent. */
  stop(opts?: { graceMs?: number }): Promise<void>;
}

const DEFAULTS = { concurrency: 10, prefetch: 0, leaseMs: 30_000, pollIntervalMs: 1_000, minPollIntervalMs: 25, shutdownGraceMs: 30_000 } as const;

export function createWorker<Args extends Record<string, unknown> = Record<string, unknown>>(options: WorkerOptions<Args>): Worker {
  return new TaskWorker(options as unknown as WorkerOptions);
}

class TaskWorker implements Worker {
  readonly ready: Promise<void>;
  readonly #opts: WorkerOptions & { [K in keyof typeof DEFAULTS]: number } & { schema: string; heartbeatMs: number };
  readonly #tools: ReadonlyMap<string, FunctionTool<unknown, unknown>>;
  readonly #log: Logger;
  readonly #pool: pg.Pool;
  /** The takes' own connection: a take never waits behind the reports and heartbeats for one. */
  readonly #takePool: pg.Pool;
  readonly #waker: Waker;
  /** Results ready at once share one finish_tasks call (one commit). */
  readonly #finishes: FinishBatch;
  readonly #wakeups: TaskWakeups;
  /** Tasks taken and not reported yet (their tool running, or their report on its way). */
  readonly #runs = new Map<string, { run: TaskRun; done: Promise<void> }>();
  /** Tools running now: the slots taken (a slot frees when its tool returns, before the report). */
  #active = 0;
  /** Tasks taken ahead, held, waiting for a slot: `launch(true)` starts one in a slot, `launch(false)` hands it back. */
  readonly #queued: { run: TaskRun; launch: (slot: boolean) => void }[] = [];
  #stopping = false;
  #stopped: Promise<void> | undefined;
  #loop: Promise<void>;
  #markReady!: () => void;

  constructor(options: WorkerOptions) {
    if (typeof options.databaseUrl !== 'string' || !options.databaseUrl) throw new TypeError('createWorker: databaseUrl is required');
    checkFunctionTools((options.tools ?? {}) as FunctionTools, 'createWorker tools');
    if (Object.keys(options.tools).length === 0) throw new TypeError('createWorker: give at least one tool');
    const concurrency = options.concurrency ?? DEFAULTS.concurrency;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError(`createWorker: concurrency must be a whole number from 1 (got ${String(concurrency)})`);
    const prefetch = options.prefetch ?? Math.floor(concurrency / 4);
    if (!Number.isInteger(prefetch) || prefetch < 0) throw new TypeError(`createWorker: prefetch must be a whole number from 0 (got ${String(prefetch)})`);
    const schema = assertSchemaName(options.schema ?? process.env.STEPD_SCHEMA ?? 'stepd');
    const leaseMs = options.leaseMs ?? DEFAULTS.leaseMs;
    // The contract's bounds (take_tasks, extend_task): a lease of 1 second to 1 day.
    if (!Number.isFinite(leaseMs) || leaseMs < 1_000 || leaseMs > 86_400_000) throw new TypeError(`createWorker: leaseMs must be from 1000 (1 s) to 86400000 (1 day) (got ${String(leaseMs)})`);
    this.#opts = { ...DEFAULTS, ...options, concurrency, prefetch, schema, leaseMs, heartbeatMs: options.heartbeatMs ?? Math.max(10, Math.floor(leaseMs / 3)) };
    this.#tools = new Map(Object.entries(options.tools));
    this.#log = (options.logger ?? createLogger({ name: 'stepd-worker' })).child({ worker: `${os.hostname()}:${process.pid}` });
    const poolOf = (max: number) => {
      const pool = new pg.Pool({ connectionString: options.databaseUrl, max, application_name: `stepd-worker:${process.pid}`, keepAlive: true, connectionTimeoutMillis: 10_000 });
      // A connection lost while idle must not kill the process: the next call gets a new one.
      pool.on('error', (err) => this.#log.debug({ err }, 'an idle database connection was lost'));
      return pool;
    };
    this.#pool = poolOf(options.poolSize ?? Math.min(10, concurrency + 1));
    this.#takePool = poolOf(1);
    this.#finishes = new FinishBatch({
      one: (item) => finishTaskWithToken(this.#pool, schema, item.task, item.result),
      many: (items) => finishTasksWithTokens(this.#pool, schema, items),
    });
    this.#waker = new Waker({ pollIntervalMs: this.#opts.pollIntervalMs, onTimer: () => {} });
    this.#wakeups = new TaskWakeups({
      url: options.databaseUrl,
      schema,
      mode: options.listen ?? 'auto',
      log: this.#log,
      notify: async (channel, payload) => void (await this.#pool.query('SELECT pg_catalog.pg_notify($1, $2)', [channel, payload])),
      onWake: () => this.#waker.wake(),
      onWorkflowHint: (workflowId) => {
        for (const { run } of this.#runs.values()) if (run.workflowId === workflowId) void run.checkLease();
      },
    });
    this.ready = new Promise((resolve) => (this.#markReady = resolve));
    if (options.handleSignals) stopOnSignals(() => this.stop(), this.#log);
    this.#loop = this.#run();
  }

  get running(): number {
    return this.#active;
  }

  get listening(): boolean {
    return this.#wakeups.listening;
  }

  stop(opts: { graceMs?: number } = {}): Promise<void> {
    this.#stopped ??= this.#stop(opts.graceMs ?? this.#opts.shutdownGraceMs);
    return this.#stopped;
  }

  async #stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    this.#waker.close();
    await this.#loop;
    this.#handBackQueued();
    const all = () => Promise.all([...this.#runs.values()].map((r) => r.done));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace'>((resolve) => (timer = setTimeout(() => resolve('grace'), graceMs)));
    if ((await Promise.race([all(), graceOver])) === 'grace') {
      this.#log.info({ running: this.#runs.size }, 'grace period over: aborting the running tasks');
      for (const { run } of this.#runs.values()) run.abortForStop();
      await all();
    }
    clearTimeout(timer);
    await this.#wakeups.close();
    await Promise.all([this.#pool.end().catch(() => {}), this.#takePool.end().catch(() => {})]);
    this.#markReady();
    this.#log.info({}, 'worker stopped');
  }

  async #run(): Promise<void> {
    await this.#wakeups.start();
    const names = [...this.#tools.keys()];
    let errors = 0;
    let idleRounds = 0;
    while (!this.#stopping) {
      this.#waker.clear();
      const free = this.#opts.concurrency + this.#opts.prefetch - this.#active - this.#queued.length;
      if (free > 0) {
        const takenAt = Date.now();
        let tasks: WorkerTask[];
        try {
          tasks = await takeTasks(this.#takePool, this.#opts.schema, { tools: names, max: free, leaseMs: this.#opts.leaseMs });
        } catch (err) {
          if (errors++ === 0) this.#log.warn({ err }, 'could not take tasks; trying again with back-off');
          await this.#waker.wait(backoffMs(errors, 5_000));
          continue;
        }
        if (errors > 0) this.#log.info({ failures: errors }, 'taking tasks again');
        errors = 0;
        this.#markReady();
        if (this.#stopping) {
          // Taken as the stop began: let them run (the stop waits for them) rather than drop them.
          for (const task of tasks) this.#start(task, takenAt);
          break;
        }
        for (const task of tasks) this.#start(task, takenAt);
        if (tasks.length === free) {
          idleRounds = 0;
          continue;
        }
        idleRounds = tasks.length > 0 ? 0 : idleRounds + 1;
      }
      const backoff = Math.min(this.#opts.pollIntervalMs, this.#opts.minPollIntervalMs * 2 ** Math.min(idleRounds, 20));
      await this.#waker.wait(this.#wakeups.listening ? this.#opts.pollIntervalMs : backoff);
    }
  }

  #start(task: WorkerTask, takenAt: number): void {
    const tool = this.#tools.get(task.tool);
    const run = new TaskRun(task, tool ?? unknownTool(task.tool), takenAt, {
      db: this.#pool,
      schema: this.#opts.schema,
      log: this.#log,
      leaseMs: this.#opts.leaseMs,
      heartbeatMs: this.#opts.heartbeatMs,
      finish: (t, result) => this.#finishes.finish({ task: t, result }),
    });
    // Held from the take on, whether it starts now or waits for a slot (prefetch).
    run.hold();
    let launch!: (slot: boolean) => void;
    const launched = new Promise<boolean>((resolve) => (launch = resolve));
    const done = launched
      .then((slot) =>
        run.run(() => {
          if (!slot) return;
          this.#active--;
          this.#launchQueued();
          this.#waker.wake();
        }),
      )
      .then((end) => {
        this.#runs.delete(task.stepId);
        this.#opts.onTaskEnd?.(task, end);
      });
    this.#runs.set(task.stepId, { run, done });
    this.#queued.push({ run, launch });
    this.#launchQueued();
  }

  /** Starts tasks taken ahead while slots are free. */
  #launchQueued(): void {
    while (this.#active < this.#opts.concurrency && this.#queued.length > 0) {
      this.#active++;
      this.#queued.shift()!.launch(true);
    }
  }

  /** Stopping: the tasks taken ahead that still wait for a slot are handed back, never started (TaskRun). */
  #handBackQueued(): void {
    if (this.#queued.length > 0) this.#log.info({ tasks: this.#queued.length }, 'stopping: handing back the tasks taken ahead that did not start');
    for (const { run, launch } of this.#queued.splice(0)) {
      run.abortForStop();
      launch(false);
    }
  }
}

/** A task of a tool this worker does not serve (take_tasks should never hand one over): failed, not retried here. */
function unknownTool(name: string): FunctionTool<unknown, unknown> {
  return {
    run: () => {
      throw new StepError('unknown_tool', `this worker does not serve ${name}`, { retryable: true, details: { tool: name } });
    },
  };
}
