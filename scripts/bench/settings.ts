/**
 * What the benchmark runs, read once from the environment:
 *   BENCH_DATABASE_URL  PostgreSQL to use (default: the `test` database on 127.0.0.1:5432)
 *   BENCH_RUNS          how many times each scenario runs (default 3; 1 with BENCH_QUICK)
 *   BENCH_QUICK=1       reduced sizes, for a smoke test (does not replace bench-results/latest.json)
 *   BENCH_PROFILE=1     run the executor under `node --cpu-prof` (profiles in bench-results/profiles;
 *                       a diagnostic: the figures of such a run are not comparable)
 */
export interface BenchSizes {
  /** Scenario 1: single-step workflows inserted at once (pg-boss: as many no-op jobs). */
  throughput: number;
  /** Scenario 2: sequential steps in one workflow (pg-boss: a chain of as many jobs). */
  chain: number;
  /** Scenario 3: items of one forEach. */
  fanout: number;
  /** Scenario 4: gates readied one at a time. */
  gates: number;
  /** Scenario 5: finished step rows bulk-inserted before measuring the claim again. */
  scaleRows: number;
}

export interface BenchSettings {
  databaseUrl: string;
  runs: number;
  quick: boolean;
  sizes: BenchSizes;
  /** Claim statements timed per run and table state. */
  claimIterations: number;
  /** How long the executor sits idle while its CPU use is measured. */
  idleSeconds: number;
  /** Length of each pgbench-style ceiling measurement. */
  ceilingSeconds: number;
  /** Client counts of the ceiling measurement (the first is the headline figure). */
  ceilingClients: number[];
  /** A scenario that has not finished by then is cut short and reported as such. */
  scenarioTimeoutMs: number;
  outDir: string;
  /** Where the executor's CPU profiles go, when profiling. */
  profileDir?: string;
}

export const DEFAULT_BENCH_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

const FULL: BenchSizes = { throughput: 10_000, chain: 1_000, fanout: 1_000, gates: 200, scaleRows: 1_000_000 };
const QUICK: BenchSizes = { throughput: 1_000, chain: 200, fanout: 200, gates: 50, scaleRows: 100_000 };

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer (got "${raw}")`);
  return n;
}

export function benchSettingsFrom(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  return Object.freeze({
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_BENCH_DATABASE_URL,
    runs: positiveInt('BENCH_RUNS', env.BENCH_RUNS, quick ? 1 : 3),
    quick,
    sizes: quick ? QUICK : FULL,
    claimIterations: quick ? 100 : 300,
    idleSeconds: quick ? 2 : 5,
    ceilingSeconds: quick ? 2 : 5,
    ceilingClients: [1, 8],
    scenarioTimeoutMs: quick ? 60_000 : 120_000,
    outDir: 'bench-results',
    ...(env.BENCH_PROFILE === '1' ? { profileDir: 'bench-results/profiles' } : {}),
  });
}
