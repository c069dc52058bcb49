/**
 * How busy the machine was: whole-machine CPU use from /proc/stat around each scenario, the
 * load average, and other sessions on the PostgreSQL server. On a shared 2-core box, anything
 * else running (a test suite, another benchmark) changes every figure; the report says so.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { StatementProbe, StatementSummary } from './statementStats.js';
import { diffAccounting, type ExecutorAccounting, type MetricSample } from './executorAccounting.js';
import type { BackendCpuProbe } from './backendCpu.js';

interface CpuSnapshot {
  busy: number;
  total: number;
}

function cpuSnapshot(): CpuSnapshot {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0); // idle + iowait
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

export interface ScenarioResources {
  wallMs: number;
  /** Executor process CPU over the scenario, in % of one core. */
  executorCpuPercent: number;
  /** All cores busy, in % of the whole machine (everything: PostgreSQL, the harness, others). */
  machineBusyPercent: number;
  /** The executor's write system calls during the scenario: about its database round trips. */
  executorWrites: number;
  /** CPU seconds of the PostgreSQL backends serving the executor's connections (backendCpu.ts), and how many. */
  postgresCpuSeconds?: number;
  postgresBackends?: number;
  /** What the executor asked of PostgreSQL (pg_stat_statements), when the server tracks it. */
  statements?: StatementSummary;
  /** The executor's claim and outcome-transaction time (its /metrics), with bench --accounting. */
  accounting?: ExecutorAccounting;
  /** PostgreSQL checkpoints that began during the scenario (checkpoints.ts). */
  checkpoints?: number;
}

export interface ProcessProbe {
  cpuSeconds(): number;
  writeSyscalls(): number;
}

/**
 * Runs `fn`, measuring wall time, the executor's CPU and writes, and the machine's CPU; with
 * `statements`, also the executor's statements (the harness's name `harnessMarker`, its schema);
 * with `scrape`, the executor's own accounting; with `backends`, the CPU of the PostgreSQL
 * backends serving it.
 */
export async function withResources<T>(
  proc: ProcessProbe,
  fn: () => Promise<T>,
  probes: {
    statements?: { probe: StatementProbe; harnessMarker: string };
    scrape?: () => Promise<MetricSample>;
    backends?: BackendCpuProbe;
    /** Checkpoints so far (checkpointsSoFar). */
    checkpoints?: () => Promise<number>;
  } = {},
): Promise<{ result: T; resources: ScenarioResources }> {
  const { statements, scrape, backends, checkpoints } = probes;
  const k0 = await checkpoints?.();
  const a0 = await scrape?.();
  const s0 = await statements?.probe.snapshot();
  await backends?.start();
  const m0 = cpuSnapshot();
  const c0 = proc.cpuSeconds();
  const w0 = proc.writeSyscalls();
  const t0 = performance.now();
  const result = await fn();
  const wallMs = performance.now() - t0;
  const c1 = proc.cpuSeconds();
  const w1 = proc.writeSyscalls();
  const m1 = cpuSnapshot();
  const pgCpu = await backends?.stop();
  const s1 = await statements?.probe.snapshot();
  const a1 = await scrape?.();
  const k1 = await checkpoints?.();
  const total = m1.total - m0.total;
  return {
    result,
    resources: {
      wallMs,
      executorCpuPercent: ((c1 - c0) / (wallMs / 1000)) * 100,
      machineBusyPercent: total > 0 ? ((m1.busy - m0.busy) / total) * 100 : Number.NaN,
      executorWrites: w1 - w0,
      ...(pgCpu ? { postgresCpuSeconds: pgCpu.cpuSeconds, postgresBackends: pgCpu.backends } : {}),
      ...(statements && s0 && s1 ? { statements: statements.probe.diff(s0, s1, statements.harnessMarker) } : {}),
      ...(a0 && a1 ? { accounting: diffAccounting(a0, a1) } : {}),
      ...(k0 !== undefined && k1 !== undefined && Number.isFinite(k1 - k0) ? { checkpoints: k1 - k0 } : {}),
    },
  };
}

export interface LoadSample {
  at: string;
  /** The machine's CPU use over one second while the benchmark itself does nothing, % of all cores. */
  backgroundBusyPercent: number;
  /** For information only: it still counts the benchmark's own previous minute. */
  loadAverage1m: number;
  /** Client sessions on the server that are not this benchmark's (any database). */
  otherSessions: number;
  /** Of those, how many were running a statement at that moment. */
  otherActive: number;
}

/** Taken between runs, when neither the benchmark's executor nor pg-boss is connected. */
export async function sampleLoad(url: string): Promise<LoadSample> {
  const m0 = cpuSnapshot();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const m1 = cpuSnapshot();
  const backgroundBusyPercent = ((m1.busy - m0.busy) / Math.max(1, m1.total - m0.total)) * 100;
  const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench' });
  await client.connect();
  try {
    const r = await client.query<{ sessions: number; active: number }>(
      `SELECT count(*)::int AS sessions, count(*) FILTER (WHERE state = 'active')::int AS active
         FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
          AND application_name NOT LIKE 'stepd-bench%'`,
    );
    return { at: new Date().toISOString(), backgroundBusyPercent, loadAverage1m: os.loadavg()[0]!, otherSessions: r.rows[0]!.sessions, otherActive: r.rows[0]!.active };
  } finally {
    await client.end();
  }
}

/** A one-line warning when the machine was not quiet during the runs, else undefined. */
export function isBusy(s: LoadSample): boolean {
  return s.backgroundBusyPercent > 10 || s.otherActive > 0;
}

export function busyWarning(samples: LoadSample[]): string | undefined {
  if (!samples.some(isBusy)) return undefined;
  const maxBusy = Math.max(...samples.map((s) => s.backgroundBusyPercent));
  const maxOthers = Math.max(...samples.map((s) => s.otherSessions));
  return `⚠ the machine was not quiet: up to ${maxBusy.toFixed(0)} % of its CPU busy with other work between runs, up to ${maxOthers} other PostgreSQL session(s); figures are lower than on an idle machine`;
}
