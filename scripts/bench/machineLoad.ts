/**
 * How busy the machine was: whole-machine CPU use from /proc/stat around each scenario, the
 * load average, and other sessions on the PostgreSQL server. On a shared 2-core box, anything
 * else running (a test suite, another benchmark) changes every figure; the report says so.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';

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
}

/** Runs `fn`, measuring wall time, the executor's CPU (via `cpuSeconds`) and the machine's. */
export async function withResources<T>(cpuSeconds: () => number, fn: () => Promise<T>): Promise<{ result: T; resources: ScenarioResources }> {
  const m0 = cpuSnapshot();
  const c0 = cpuSeconds();
  const t0 = performance.now();
  const result = await fn();
  const wallMs = performance.now() - t0;
  const c1 = cpuSeconds();
  const m1 = cpuSnapshot();
  const total = m1.total - m0.total;
  return {
    result,
    resources: {
      wallMs,
      executorCpuPercent: ((c1 - c0) / (wallMs / 1000)) * 100,
      machineBusyPercent: total > 0 ? ((m1.busy - m0.busy) / total) * 100 : Number.NaN,
    },
  };
}

export interface LoadSample {
  at: string;
  loadAverage1m: number;
  /** Client sessions on the server that are not this benchmark's (any database). */
  otherSessions: number;
  /** Of those, how many were running a statement at that moment. */
  otherActive: number;
}

/** Taken between runs, when neither the benchmark's executor nor pg-boss is connected. */
export async function sampleLoad(url: string): Promise<LoadSample> {
  const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench' });
  await client.connect();
  try {
    const r = await client.query<{ sessions: number; active: number }>(
      `SELECT count(*)::int AS sessions, count(*) FILTER (WHERE state = 'active')::int AS active
         FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
          AND application_name NOT LIKE 'stepd-bench%'`,
    );
    return { at: new Date().toISOString(), loadAverage1m: os.loadavg()[0]!, otherSessions: r.rows[0]!.sessions, otherActive: r.rows[0]!.active };
  } finally {
    await client.end();
  }
}

/** A one-line warning when the machine was not quiet during the runs, else undefined. */
export function busyWarning(samples: LoadSample[], cpus: number): string | undefined {
  const maxLoad = Math.max(...samples.map((s) => s.loadAverage1m));
  const maxOthers = Math.max(...samples.map((s) => s.otherSessions));
  if (maxLoad <= cpus * 0.5 && maxOthers === 0) return undefined;
  return `⚠ the machine was not quiet: load average up to ${maxLoad.toFixed(1)} on ${cpus} CPUs, up to ${maxOthers} other PostgreSQL session(s); figures are lower than on an idle machine`;
}
