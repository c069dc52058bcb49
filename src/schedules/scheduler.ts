/**
 * The daemon's side of schedules (docs/schedules.md): runs pg-boss in `<schema>_boss`, keeps
 * pg-boss's schedules in step with stepd's `schedules` table (the only one clients write: at
 * start, then every `syncIntervalMs`), and works the schedules queue. pg-boss's cron pass (shared
 * by every executor, under its own claim) sends one job per occurrence; each job starts the
 * tick's workflow only if the tick is near the job (pg-boss forwards an occurrence within a
 * minute) and later than the last tick started for that schedule (recorded in the same
 * statement), so a tick starts exactly one workflow whatever the number of executors, restarts,
 * retries or clock skew, and a replayed job never starts an old tick again.
 *
 * pg-boss failing never stops the executor: start() returns at once and keeps trying in the
 * background with backoff; pg-boss's own errors (a lost database, a failed cron pass) are logged,
 * once per minute per kind, and pg-boss retries on its own intervals.
 *
 * A daemon with no schedules runs no pg-boss at all (no connections, no polling): it looks for a
 * schedule every `idleCheckMs` (one indexed read) and starts pg-boss once there is one; from then
 * on pg-boss runs until the daemon stops.
 */
import type pg from 'pg';
import { PgBoss, type JobWithMetadata } from 'pg-boss';
import { createPool, isConnectionError } from '../db/connect.js';
import { anySchedule, getSchedule, listScheduleTimings } from '../db/queries/schedules.js';
import { listCatchUpCandidates } from '../db/queries/scheduleTicks.js';
import { DEFAULT_MISSED_AFTER_MS, missedTicks } from './catchUp.js';
import { startTickUnderPolicies, type TickOutcome } from './tickStart.js';
import { backoffMs } from '../executor/core/dbOutage.js';
import type { Logger } from '../logger.js';
import { bossSchemaName, SCHEDULE_QUEUE, SCHEDULE_QUEUE_OPTIONS } from './bossSchema.js';
import { latestOccurrenceAtOrBefore } from './tickTime.js';

/** What a schedule's pg-boss job carries: only the schedule's name (the rest is read from stepd's row). */
export interface ScheduleJobData {
  schedule?: unknown;
}

export interface SchedulerOptions {
  databaseUrl: string;
  schema: string;
  log: Logger;
  /** How often this executor fetches tick jobs (pg-boss work polling; default 5 s, at least 0.5). */
  pollIntervalSeconds?: number;
  /** pg-boss's cron pass interval, 1–45 s (pg-boss's default 30). Tests shorten it. */
  cronMonitorIntervalSeconds?: number;
  /** How often pg-boss forwards due occurrences to the queue, 1–45 s (pg-boss's default 5). */
  cronWorkerIntervalSeconds?: number;
  /** While there is no schedule, how often to look for one (default 30 s, pg-boss's own cron pass interval). */
  idleCheckMs?: number;
  /** How often pg-boss's schedules are brought in step with stepd's table (default 10 s; two small reads), and missed ticks caught up. */
  syncIntervalMs?: number;
  /** A tick this old without a workflow counts as missed, for `--catch-up` (default 2 min). */
  missedAfterMs?: number;
}

const DEFAULT_POLL_SECONDS = 5;
const DEFAULT_IDLE_CHECK_MS = 30_000;
const DEFAULT_SYNC_INTERVAL_MS = 10_000;
/**
 * The longest a tick's job may come after the tick: pg-boss forwards an occurrence within its
 * cron pass (at most 45 s) and a job keeps its creation time across retries; a job further from
 * its tick was not sent for it (a hand-written or replayed job) and starts nothing.
 */
const FORWARD_WINDOW_MS = 10 * 60_000;
const ERROR_LOG_EVERY_MS = 60_000;

export class Scheduler {
  private readonly pool: pg.Pool;
  private readonly log: Logger;
  private boss: PgBoss | undefined;
  private stopping = false;
  private running: Promise<void> | undefined;
  private cancelSleep: (() => void) | undefined;
  /** When each kind of pg-boss error was last logged, so an outage logs once a minute, not per poll. */
  private readonly lastLogged = new Map<string, number>();

  constructor(private readonly opts: SchedulerOptions) {
    this.log = opts.log.child({ component: 'scheduler' });
    this.pool = createPool({ url: opts.databaseUrl, schema: opts.schema, role: 'executor', max: 2, applicationName: `stepd-scheduler:${opts.schema}` });
  }

  /** Whether pg-boss is running and working the schedules queue. */
  get started(): boolean {
    return this.boss !== undefined;
  }

  /** Starts pg-boss in the background, retrying with backoff until it runs. Never throws. */
  start(): void {
    this.running ??= this.startLoop();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.cancelSleep?.();
    await this.running;
    const boss = this.boss;
    this.boss = undefined;
    await boss?.stop({ graceful: true, timeout: 5_000 }).catch((err: unknown) => this.log.warn({ err }, 'pg-boss did not stop cleanly'));
    await this.pool.end().catch(() => {});
  }

  private async startLoop(): Promise<void> {
    let idleLogged = false;
    for (let attempt = 1; !this.stopping; attempt++) {
      try {
        if (!(await anySchedule(this.pool))) {
          if (!idleLogged) this.log.info({}, 'no schedules: pg-boss not started (looking again every so often)');
          idleLogged = true;
          attempt = 0;
          await this.sleep(this.opts.idleCheckMs ?? DEFAULT_IDLE_CHECK_MS);
          continue;
        }
        const boss = await this.startBoss();
        this.log.info({ schema: bossSchemaName(this.opts.schema), queue: SCHEDULE_QUEUE }, 'schedules running (pg-boss started)');
        await this.syncLoop(boss);
        if (this.stopping) return;
        // The last schedule was removed: pg-boss stops (its polling and supervision with it) until one is added.
        this.boss = undefined;
        await boss.stop({ graceful: true, timeout: 5_000 }).catch((err: unknown) => this.log.warn({ err }, 'pg-boss did not stop cleanly'));
        this.log.info({}, 'no schedules left: pg-boss stopped (looking again every so often)');
        idleLogged = true;
        attempt = 0;
      } catch (err) {
        const delayMs = backoffMs(attempt, 30_000);
        this.logError('start', err, { delayMs }, 'pg-boss could not start; schedules wait (retrying; run `stepd migrate` if the pg-boss schema is missing or old)');
        await this.sleep(delayMs);
      }
    }
  }

  /**
   * Keeps pg-boss's schedules in step with stepd's table until the daemon stops, or until a sync
   * finds no schedule left (pg-boss's copies were just taken out; a read that fails counts as some).
   */
  private async syncLoop(boss: PgBoss): Promise<void> {
    while (!this.stopping) {
      await this.syncSchedules(boss).catch((err: unknown) => this.logError('sync', err, {}, "could not bring pg-boss's schedules in step with stepd's"));
      await this.catchUp(boss).catch((err: unknown) => this.logError('catch-up', err, {}, 'could not catch up missed ticks'));
      if (!(await anySchedule(this.pool).catch(() => true))) return;
      await this.sleep(this.opts.syncIntervalMs ?? DEFAULT_SYNC_INTERVAL_MS);
    }
  }

  private async startBoss(): Promise<PgBoss> {
    const o = this.opts;
    const boss = new PgBoss({
      connectionString: o.databaseUrl,
      schema: bossSchemaName(o.schema),
      application_name: `stepd-scheduler-boss:${o.schema}`,
      max: 3,
      // `stepd migrate` installs and upgrades the schema; the daemon only checks its version.
      migrate: false,
      schedule: true,
      supervise: true,
      // Rebuilding indexes needs their owner; the daemon runs as the executor role.
      reindex: false,
      ...(o.cronMonitorIntervalSeconds !== undefined ? { cronMonitorIntervalSeconds: o.cronMonitorIntervalSeconds } : {}),
      ...(o.cronWorkerIntervalSeconds !== undefined ? { cronWorkerIntervalSeconds: o.cronWorkerIntervalSeconds } : {}),
    });
    // An 'error' event without a listener would throw and kill the process.
    boss.on('error', (err: unknown) => this.logError('pg-boss', err, {}, 'pg-boss reported an error (it retries on its own)'));
    boss.on('warning', (w: unknown) => this.log.warn({ warning: w }, 'pg-boss warning'));
    try {
      await boss.start();
      if (this.stopping) throw new Error('stopping');
      // Normally created by `stepd migrate` (a DBA's script may not have). Only when missing:
      // createQueue always takes pg-boss's advisory lock, whose key any connected role may hold.
      if (!(await boss.getQueue(SCHEDULE_QUEUE))) await boss.createQueue(SCHEDULE_QUEUE, SCHEDULE_QUEUE_OPTIONS);
      await boss.work<ScheduleJobData, unknown, { pollingIntervalSeconds: number; batchSize: number; includeMetadata: true }>(
        SCHEDULE_QUEUE,
        { pollingIntervalSeconds: o.pollIntervalSeconds ?? DEFAULT_POLL_SECONDS, batchSize: 10, includeMetadata: true },
        async (jobs) => {
          for (const job of jobs) await this.startTick(boss, job);
        },
      );
    } catch (err) {
      await boss.stop({ graceful: false, timeout: 1_000 }).catch(() => {});
      throw err;
    }
    this.boss = boss;
    return boss;
  }

  /**
   * One tick: the workflow of the latest occurrence of the schedule's cron at or before the
   * moment pg-boss forwarded the job. A throw fails the job and pg-boss retries it (a lost
   * database); the insert is idempotent, so a retry never starts a second workflow.
   */
  private async startTick(boss: PgBoss, job: JobWithMetadata<ScheduleJobData>): Promise<void> {
    const name = typeof job.data?.schedule === 'string' ? job.data.schedule : undefined;
    if (!name) {
      this.log.warn({ jobId: job.id }, 'a schedules job without a schedule name: ignored');
      return;
    }
    const row = await getSchedule(this.pool, name);
    if (!row) {
      // Removed from stepd's table (by plain SQL, say) but still in pg-boss's: stop its ticks.
      this.log.info({ schedule: name }, 'tick of a schedule that no longer exists: nothing started; unscheduling it');
      await boss.unschedule(SCHEDULE_QUEUE, name);
      return;
    }
    let tick: Date | undefined;
    try {
      tick = latestOccurrenceAtOrBefore((cron, options) => boss.previewSchedule(cron, options), row.cron, row.tz, new Date(job.createdOn));
    } catch (err) {
      this.log.warn({ err, schedule: name, cron: row.cron, tz: row.tz }, 'schedule cron cannot be read: nothing started');
      return;
    }
    if (!tick) {
      this.log.warn({ schedule: name, cron: row.cron, tz: row.tz, at: job.createdOn }, 'no occurrence of the schedule before its job: nothing started');
      return;
    }
    if (new Date(job.createdOn).getTime() - tick.getTime() > FORWARD_WINDOW_MS) {
      this.log.warn({ schedule: name, tick: tick.toISOString(), at: job.createdOn, jobId: job.id }, 'a schedules job long after the latest tick (not sent for it): nothing started');
      return;
    }
    this.logTick(name, tick, await startTickUnderPolicies(this.pool, { schema: this.opts.schema, schedule: row, tick }), 'job');
  }

  /** Starts the ticks each catching-up schedule missed (catchUp.ts), oldest first, through the same locked start as a job. */
  private async catchUp(boss: PgBoss): Promise<void> {
    for (const c of await listCatchUpCandidates(this.pool)) {
      if (this.stopping) return;
      const cutoff = new Date(c.now.getTime() - (this.opts.missedAfterMs ?? DEFAULT_MISSED_AFTER_MS));
      let ticks: Date[];
      try {
        ticks = missedTicks((cron, options) => boss.previewSchedule(cron, options), c, cutoff);
      } catch (err) {
        this.log.debug({ err, schedule: c.name }, 'schedule cron cannot be read: nothing caught up');
        continue;
      }
      if (ticks.length === 0) continue;
      const row = await getSchedule(this.pool, c.name);
      if (!row || row.paused) continue;
      for (const tick of ticks) this.logTick(c.name, tick, await startTickUnderPolicies(this.pool, { schema: this.opts.schema, schedule: row, tick }), 'catch-up');
    }
  }

  private logTick(schedule: string, tick: Date, r: TickOutcome, via: 'job' | 'catch-up'): void {
    const at = { schedule, tick: tick.toISOString(), via };
    switch (r.outcome) {
      case 'started':
        this.log.info({ ...at, workflowId: r.workflowId, ...(r.cancelled ? { cancelled: r.cancelled } : {}) }, r.cancelled ? 'schedule cancelled the previous tick\'s workflow and started a workflow' : 'schedule started a workflow');
        return;
      case 'skipped-overlap':
        this.log.info({ ...at, running: r.running }, 'tick skipped: the previous tick\'s workflow is still running (overlap skip)');
        return;
      case 'paused':
        this.log.debug(at, 'tick of a paused schedule: nothing started');
        return;
      default:
        this.log.debug(at, 'tick not later than the last one handled: nothing started');
    }
  }

  /**
   * pg-boss's schedules of the schedules queue made equal to stepd's table: missing or changed
   * ones (re)scheduled with only the name as data, ones stepd does not have unscheduled. Every
   * daemon runs it; the writes are idempotent upserts and deletes.
   */
  private async syncSchedules(boss: PgBoss): Promise<void> {
    const [rows, known] = await Promise.all([listScheduleTimings(this.pool), boss.getSchedules(SCHEDULE_QUEUE)]);
    const wanted = new Set(rows.map((r) => r.name));
    for (const s of known) {
      if (wanted.has(s.key)) continue;
      await boss.unschedule(SCHEDULE_QUEUE, s.key);
      this.log.info({ schedule: s.key }, 'schedule removed from pg-boss (not in stepd.schedules)');
    }
    const have = new Map(known.map((s) => [s.key, s]));
    for (const row of rows) {
      const s = have.get(row.name);
      if (s && s.cron === row.cron && s.timezone === row.tz && (s.data as ScheduleJobData | undefined)?.schedule === row.name) continue;
      try {
        await boss.schedule(SCHEDULE_QUEUE, row.cron, { schedule: row.name }, { tz: row.tz, key: row.name });
        this.log.info({ schedule: row.name, cron: row.cron, tz: row.tz }, 'schedule put into pg-boss');
      } catch (err) {
        this.logError(`schedule:${row.name}`, err, { schedule: row.name, cron: row.cron }, 'schedule cannot be scheduled by pg-boss');
      }
    }
  }

  private logError(kind: string, err: unknown, fields: object, message: string): void {
    const key = `${kind}:${isConnectionError(err) ? 'connection' : 'other'}`;
    const now = Date.now();
    const last = this.lastLogged.get(key);
    if (last !== undefined && now - last < ERROR_LOG_EVERY_MS) {
      this.log.debug({ err, ...fields }, message);
      return;
    }
    this.lastLogged.set(key, now);
    this.log.warn({ err, ...fields }, message);
  }

  private sleep(ms: number): Promise<void> {
    // stop() may have come while this loop was busy: its cancel missed this sleep.
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.cancelSleep = done;
    });
  }
}
