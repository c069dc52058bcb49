/**
 * What the benchmark runs, read once from the command line and the environment (a flag wins):
 *   --only a,b        BENCH_ONLY     run only these scenarios (names below; default: all)
 *   --size small      BENCH_SIZE     reduced sizes for a quick look (BENCH_QUICK=1 is the same);
 *                                    such a run does not replace bench-results/latest.json
 *   --runs N          BENCH_RUNS     how many times each scenario runs (default 3; 1 with --size small)
 *   --io-concurrency N BENCH_IO_CONCURRENCY  the executor's --concurrency in the io scenario (64)
 *                     BENCH_SIGNALS_PER_SECOND  the signals scenario's pace (1,000/s)
 *                     BENCH_WORKERS, BENCH_WORKER_CONCURRENCY  the workers scenario: worker processes (3), tasks each (4;
 *                                    3 × 16 asks for 2,400 steps/s, more than 2 cores give: docs/performance.md)
 *   --accounting      BENCH_ACCOUNTING=1  run the executors with --http and read their /metrics around each
 *                                    scenario (claim and outcome-transaction time); a diagnostic
 *   --compare REF     BENCH_COMPARE  also run the stepd scenarios with the code of git REF, built in a
 *                                    temporary folder, alternating with this tree run by run
 *                     BENCH_DATABASE_URL  PostgreSQL to use (default: the `test` database on 127.0.0.1:5432)
 *                     BENCH_PROFILE=1     run the executor under `node --cpu-prof` (profiles in
 *                                    bench-results/profiles; a diagnostic: such figures are not comparable)
 * `npm run bench` passes no arguments to the script: use the variables there, or the flags with
 * `sh scripts/node22.sh node dist/scripts/bench.js --only foreach1k` after a build.
 */
export interface BenchSizes {
  /** Scenario 1: single-step workflows inserted at once (pg-boss: as many no-op jobs). */
  throughput: number;
  /** Scenario 1b: the same, five times as many: long enough to measure the steady state, not the ramp. */
  sustained: number;
  /** Scenario 2: sequential steps in one workflow (pg-boss: a chain of as many jobs). */
  chain: number;
  /** Scenario 3: items of one forEach. */
  fanout: number;
  /** Scenario 4: gates readied one at a time. */
  gates: number;
  /** Scenario 5: finished step rows bulk-inserted before measuring the claim again. */
  scaleRows: number;
  /** Scenario 6: three-step workflows, each step a 20 ms `core.sleep`. */
  io: number;
  /** Scenario 7: items of one large forEach. */
  fanoutLarge: number;
  /** Scenario 4b: workflows waiting for a signal, and the signals sent to them per second. */
  signals: number;
  signalsPerSecond: number;
  /** Scenario 4c: gates readied by four racing clients, and each client's pace per second. */
  raceGates: number;
  racePerSecond: number;
  /** Scenario 6b: one-step workflows served by worker processes (a 20 ms tool). */
  workers: number;
  /** Scenario 6b: steps of the chains that measure the latency a worker adds per step. */
  workerChain: number;
  /** Scenario 9: concurrency keys (limit 1 each), and single-step workflows per key. */
  keys: number;
  perKey: number;
  /** Scenario 0, the floor (bench/floor.ts): one-step workflows per pass, and hops of its chain. */
  floor: number;
  floorHops: number;
}

/** Scenario names accepted by --only, in the order they run. */
export const SCENARIOS = ['throughput', 'sustained', 'chain', 'foreach1k', 'foreach1kFirst', 'wakeup', 'signals', 'gaterace', 'io', 'workers', 'foreach10k', 'keys', 'idle', 'floor', 'ceiling', 'pgboss', 'scale'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface BenchSettings {
  databaseUrl: string;
  runs: number;
  /** Reduced sizes (--size small). */
  quick: boolean;
  /** Every scenario unless --only was given. */
  only: ScenarioName[];
  sizes: BenchSizes;
  /** The executor's concurrency in the io scenario (its ideal is this ÷ 20 ms). */
  ioConcurrency: number;
  /** How long each io step's tool waits (and each worker task, scenario 6b). */
  ioSleepMs: number;
  /** Scenario 6b: worker processes, and the tasks each runs at once (ideal: their product ÷ 20 ms). */
  workerProcesses: number;
  workerConcurrency: number;
  /** A git ref whose code runs the stepd scenarios too, side by side with this tree. */
  compare?: string;
  /** Read the executors' /metrics around each scenario (they run with --http). */
  accounting: boolean;
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

/**
 * Scenario 1's warm-up, the same for stepd and pg-boss: this many one-step no-op workflows (jobs)
 * run to the end before the measured ones (at most the scenario's own size), so both sides' first
 * compilations and plans stay out of the figure.
 */
export const THROUGHPUT_WARMUP = 2_000;

export const DEFAULT_BENCH_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

const FULL: BenchSizes = { throughput: 10_000, sustained: 50_000, chain: 1_000, fanout: 1_000, gates: 200, scaleRows: 1_000_000, io: 10_000, fanoutLarge: 10_000, signals: 10_000, signalsPerSecond: 1_000, raceGates: 1_800, racePerSecond: 360, keys: 1_000, perKey: 10, workers: 10_000, workerChain: 100, floor: 20_000, floorHops: 1_000 };
const SMALL: BenchSizes = { throughput: 1_000, sustained: 5_000, chain: 200, fanout: 200, gates: 50, scaleRows: 100_000, io: 1_000, fanoutLarge: 2_000, signals: 2_000, signalsPerSecond: 1_000, raceGates: 360, racePerSecond: 360, keys: 1_000, perKey: 2, workers: 1_000, workerChain: 30, floor: 2_000, floorHops: 200 };

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer (got "${raw}")`);
  return n;
}

/** What `--help` prints. */
export const BENCH_USAGE = `usage: npm run bench   (or, after a build: sh scripts/node22.sh node dist/scripts/bench.js [flags])

  --only a,b          BENCH_ONLY            run only these scenarios: ${SCENARIOS.join(', ')}
  --size small        BENCH_SIZE            reduced sizes for a quick look (does not replace latest.json)
  --runs N            BENCH_RUNS            runs of each scenario (default 3; 1 with --size small)
  --io-concurrency N  BENCH_IO_CONCURRENCY  the executor's --concurrency in the io scenario (64)
  --compare REF       BENCH_COMPARE         also run the stepd scenarios with git REF, alternating
  --accounting        BENCH_ACCOUNTING=1    read the executors' /metrics around each scenario
                      BENCH_DATABASE_URL    PostgreSQL to use (default ${DEFAULT_BENCH_DATABASE_URL})
                      BENCH_PROFILE=1       run the executor under node --cpu-prof
                      BENCH_WORKERS, BENCH_WORKER_CONCURRENCY  scenario workers: processes (3) × tasks each (4)
                      BENCH_SIGNALS_PER_SECOND  the signals scenario's pace (1000; a diagnostic below the target's)
  --help                                    this text

npm run bench passes no flags to the script: use the variables there.
`;

/** Whether the command line asks for the usage text (nothing is run then). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/** The flags benchSettingsFrom reads. */
const FLAGS = new Set(['only', 'size', 'runs', 'io-concurrency', 'compare', 'accounting']);
/** Flags that take no value. */
const SWITCHES = new Set(['accounting']);

/** `--name value` and `--name=value` pairs, and switches (`--accounting`: "true"); a flag without a value is an error. */
export function parseFlags(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unexpected argument "${arg}" (flags: --only, --size, --runs, --io-concurrency, --compare, --accounting, --help)`);
    if (!FLAGS.has(m[1]!)) throw new Error(`unknown flag --${m[1]} (see --help)`);
    if (SWITCHES.has(m[1]!) && m[2] === undefined) {
      out[m[1]!] = 'true';
      continue;
    }
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new Error(`${arg} needs a value`);
    out[m[1]!] = value;
  }
  return out;
}

function parseOnly(raw: string | undefined): ScenarioName[] {
  if (raw === undefined || raw.trim() === '') return [...SCENARIOS];
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean).map((s) => (s === 'fanout' ? 'foreach1k' : s));
  const unknown = names.filter((n) => !(SCENARIOS as readonly string[]).includes(n));
  if (unknown.length > 0) throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${SCENARIOS.join(', ')}`);
  return SCENARIOS.filter((s) => names.includes(s));
}

export function benchSettingsFrom(env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = process.argv.slice(2)): BenchSettings {
  const flags = parseFlags(argv);
  const size = flags.size ?? env.BENCH_SIZE ?? (env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true' ? 'small' : 'full');
  if (size !== 'small' && size !== 'full') throw new Error(`--size must be small or full (got "${size}")`);
  const quick = size === 'small';
  const compare = (flags.compare ?? env.BENCH_COMPARE)?.trim();
  return Object.freeze({
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_BENCH_DATABASE_URL,
    runs: positiveInt('--runs', flags.runs ?? env.BENCH_RUNS, quick ? 1 : 3),
    quick,
    only: parseOnly(flags.only ?? env.BENCH_ONLY),
    sizes: { ...(quick ? SMALL : FULL), signalsPerSecond: positiveInt('BENCH_SIGNALS_PER_SECOND', env.BENCH_SIGNALS_PER_SECOND, 1_000) },
    ioConcurrency: positiveInt('--io-concurrency', flags['io-concurrency'] ?? env.BENCH_IO_CONCURRENCY, 64),
    ioSleepMs: 20,
    workerProcesses: positiveInt('BENCH_WORKERS', env.BENCH_WORKERS, 3),
    // 3 × 4 ÷ 20 ms = 600 steps/s: below what this 2-core machine's CPU can give for a worker step's
    // row work (about 1,000/s); 3 × 16 = 2,400/s measured the CPU, not the path (docs/performance.md, "Workers").
    workerConcurrency: positiveInt('BENCH_WORKER_CONCURRENCY', env.BENCH_WORKER_CONCURRENCY, 4),
    ...(compare ? { compare } : {}),
    accounting: ['1', 'true'].includes(flags.accounting ?? env.BENCH_ACCOUNTING ?? ''),
    claimIterations: quick ? 100 : 300,
    idleSeconds: quick ? 2 : 5,
    ceilingSeconds: quick ? 2 : 5,
    ceilingClients: [1, 8],
    scenarioTimeoutMs: quick ? 60_000 : 120_000,
    outDir: 'bench-results',
    ...(env.BENCH_PROFILE === '1' ? { profileDir: 'bench-results/profiles' } : {}),
  });
}

/** Whether this run covers every scenario at full size (only then is latest.json replaced). */
export function isFullRun(s: BenchSettings): boolean {
  return !s.quick && s.only.length === SCENARIOS.length && s.profileDir === undefined && !s.accounting && s.sizes.signalsPerSecond === FULL.signalsPerSecond;
}
