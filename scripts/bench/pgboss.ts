/**
 * Scenario 6b, pg-boss 12 (an installed dependency) doing scenarios 1 and 2 in its own schema:
 *   throughput: N no-op jobs inserted with one insert(), worked in batches (and, with the
 *   sustained scenario, as many jobs as it has workflows, in a queue of their own);
 *   chain: N jobs, each handler sending the next (the send commits before the completion).
 * Times come from pg-boss's job rows (database clock): created_on, started_on, completed_on.
 *
 * Settings ("best we found", see PGBOSS_THROUGHPUT_WORK): LISTEN/NOTIFY on (useListenNotify +
 * queue `notify`), so a worker wakes as soon as jobs are inserted instead of at its next poll
 * (the minimum poll is 0.5 s); batch fetches with burstWhenBatchFull, so a worker keeps fetching
 * while batches come back full; no cron, no supervisor (maintenance would only add noise).
 */
import { PgBoss } from 'pg-boss';
import type pg from 'pg';
import { BackendCpuProbe } from './backendCpu.js';
import { clientPool, MS_BETWEEN, newSchemaName, pollUntil, TimeoutError, dropSchemaLater, type Cleanup } from './pg.js';
import { THROUGHPUT_WARMUP } from './settings.js';
import { summarize, type LatencySummary } from './stats.js';

export interface PgBossThroughputResult {
  jobs: number;
  elapsedMs: number;
  jobsPerSec: number;
  /**
   * CPU per job while the measured jobs ran: this process (pg-boss's client, and the harness's
   * light polling), and the PostgreSQL backends of pg-boss's own connections (backendCpu.ts).
   */
  clientCpuMsPerJob?: number;
  postgresCpuMsPerJob?: number;
  timedOut: boolean;
}

export interface PgBossChainResult {
  jobs: number;
  totalMs: number;
  /** completed_on(i+1) − completed_on(i), as for stepd's chain. */
  hopMs: LatencySummary;
  timedOut: boolean;
}

export interface PgBossResult {
  throughput: PgBossThroughputResult;
  /** The same with as many jobs as the sustained scenario has workflows (when it runs). */
  sustained?: PgBossThroughputResult;
  chain: PgBossChainResult;
}

/**
 * Tried on the 2-core bench machine with 10,000 jobs, each after a warm-up (jobs/s, noisy):
 * batchSize × localConcurrency 100×2 ≈ 3.2k, 500×4 ≈ 10–14k, 1000×4 ≈ 12–18.7k, 2000×2 ≈ 10–17.7k,
 * 2000×4 ≈ 13–15k, 1000×8 ≈ 13k. 1000×4 was the best.
 */
export const PGBOSS_THROUGHPUT_WORK = { batchSize: 1000, localConcurrency: 4, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 } as const;
export const PGBOSS_CHAIN_WORK = { batchSize: 1, localConcurrency: 1, pollingIntervalSeconds: 0.5 } as const;

type Job = { id: string; data: { i?: number } };

async function jobQuery<R>(boss: PgBoss, text: string, values: unknown[]): Promise<R[]> {
  return (await boss.getDb().executeSql(text, values)).rows as R[];
}

/** Polls on the harness's own connection (`reader`), so pg-boss's connections carry only its work. */
async function waitForCompleted(reader: pg.Pool, schema: string, queue: string, count: number, timeoutMs: number): Promise<boolean> {
  try {
    await pollUntil(
      async () => {
        const { rows: [r] } = await reader.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.job WHERE name = $1 AND state = 'completed'`, [queue]);
        return r!.n >= count;
      },
      { what: `${count} pg-boss jobs in ${queue}`, intervalMs: 20, timeoutMs },
    );
    return false;
  } catch (err) {
    if (err instanceof TimeoutError) return true;
    throw err;
  }
}

/** Inserts `count` no-op jobs at once into a fresh queue worked with the throughput settings. */
async function noopJobs(boss: PgBoss, reader: pg.Pool, schema: string, queue: string, count: number, timeoutMs: number): Promise<boolean> {
  await boss.createQueue(queue, { notify: true });
  await boss.work<object>(queue, { ...PGBOSS_THROUGHPUT_WORK }, async () => {});
  await boss.insert(queue, Array.from({ length: count }, (_, i) => ({ data: { i } })));
  const timedOut = await waitForCompleted(reader, schema, queue, count, timeoutMs);
  await boss.offWork(queue);
  return timedOut;
}

async function throughput(boss: PgBoss, reader: pg.Pool, schema: string, count: number, timeoutMs: number, queue = 'bench_noop'): Promise<PgBossThroughputResult> {
  // The warm-up the stepd executor gets too (runWarmedThroughput): first compilations and plans stay out of the figure.
  await noopJobs(boss, reader, schema, `${queue}_warmup`, Math.min(THROUGHPUT_WARMUP, count), timeoutMs);
  const backends = new BackendCpuProbe({ query: (text, values) => reader.query(text, values), clientPid: process.pid, applicationName: 'stepd-bench-pgboss' });
  await backends.start();
  const cpu0 = process.cpuUsage();
  const timedOut = await noopJobs(boss, reader, schema, queue, count, timeoutMs);
  const cpu = process.cpuUsage(cpu0);
  const pgCpu = await backends.stop();
  const [r] = await jobQuery<{ jobs: number; elapsed_ms: number }>(
    boss,
    `SELECT count(*) FILTER (WHERE state = 'completed')::int AS jobs, ${MS_BETWEEN('min(created_on)', 'max(completed_on)')} AS elapsed_ms
       FROM ${schema}.job WHERE name = $1`,
    [queue],
  );
  return {
    jobs: r!.jobs, elapsedMs: r!.elapsed_ms, jobsPerSec: (r!.jobs / r!.elapsed_ms) * 1000, timedOut,
    clientCpuMsPerJob: (cpu.user + cpu.system) / 1000 / Math.max(1, r!.jobs),
    postgresCpuMsPerJob: (pgCpu.cpuSeconds * 1000) / Math.max(1, r!.jobs),
  };
}

async function chain(boss: PgBoss, reader: pg.Pool, schema: string, length: number, timeoutMs: number): Promise<PgBossChainResult> {
  const queue = 'bench_chain';
  await boss.createQueue(queue, { notify: true });
  await boss.work<{ i: number }>(queue, { ...PGBOSS_CHAIN_WORK }, async (jobs) => {
    for (const job of jobs as Job[]) {
      const next = (job.data.i ?? 0) + 1;
      if (next < length) await boss.send(queue, { i: next });
    }
  });
  await boss.send(queue, { i: 0 });
  const timedOut = await waitForCompleted(reader, schema, queue, length, timeoutMs);
  await boss.offWork(queue);
  const rows = await jobQuery<{ hop_ms: number | null }>(
    boss,
    `SELECT ${MS_BETWEEN('lag(completed_on) OVER w', 'completed_on')} AS hop_ms
       FROM ${schema}.job WHERE name = $1 AND state = 'completed' WINDOW w AS (ORDER BY (data->>'i')::int)`,
    [queue],
  );
  const [t] = await jobQuery<{ total_ms: number }>(
    boss,
    `SELECT ${MS_BETWEEN('min(created_on)', 'max(completed_on)')} AS total_ms FROM ${schema}.job WHERE name = $1`,
    [queue],
  );
  const hops = rows.map((r) => r.hop_ms).filter((v): v is number => v !== null);
  return { jobs: rows.length, totalMs: t!.total_ms, hopMs: summarize(hops), timedOut };
}

export async function runPgBoss(opts: { url: string; cleanup: Cleanup; jobs: number; sustainedJobs?: number; chain: number; timeoutMs: number }): Promise<PgBossResult> {
  const schema = newSchemaName('pgboss');
  const drop = dropSchemaLater(opts.cleanup, opts.url, schema);
  const boss = new PgBoss({ connectionString: opts.url, schema, useListenNotify: true, schedule: false, supervise: false, max: 10, application_name: 'stepd-bench-pgboss' });
  const errors: Error[] = [];
  boss.on('error', (err: Error) => errors.push(err));
  const reader = clientPool(opts.url, 2);
  const closeReader = opts.cleanup.add('close pg-boss reader', () => reader.end());
  const stop = opts.cleanup.add('stop pg-boss', () => boss.stop({ graceful: false, timeout: 2_000 }));
  try {
    await boss.start();
    const t = await throughput(boss, reader, schema, opts.jobs, opts.timeoutMs);
    const sustained = opts.sustainedJobs === undefined ? undefined : await throughput(boss, reader, schema, opts.sustainedJobs, opts.timeoutMs, 'bench_sustained');
    const c = await chain(boss, reader, schema, opts.chain, opts.timeoutMs);
    if (errors.length > 0) throw new Error(`pg-boss reported ${errors.length} error(s), e.g. ${errors[0]!.message}`);
    return { throughput: t, ...(sustained ? { sustained } : {}), chain: c };
  } finally {
    await stop();
    await closeReader();
    await drop();
  }
}
