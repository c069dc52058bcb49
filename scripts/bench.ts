/**
 * `npm run bench`: the performance benchmark (issues 5 and 12).
 *
 * Per run: the stepd scenarios (fresh schema, a stepd executor in its own process, everything
 * driven through SQL from here): 1 throughput, 1b sustained throughput (five times as many), 2 chain, 3 forEach of 1,000, 3b the same with
 * `complete: "first"`, 4 wake-up, the
 * executor's idle CPU and memory, 6 io-bound three-step workflows (own executor, explicit
 * concurrency), 7 forEach of 10,000 with its peak RSS; then the floor (0: a one-step workflow's and a
 * chain hop's row work alone, server-side, on bare tables and on stepd's schema), the pgbench-style ceiling (1 and 8
 * clients) and pg-boss doing scenarios 1, 1b and 2. Once: the claim statement's latency with 0 and
 * with 1,000,000 finished step rows. When the server loads pg_stat_statements, each stepd
 * scenario also reports the executor's statements per step.
 * Prints a table (median and min–max over the runs, ratios to the peers, targets) and writes
 * bench-results/latest.json plus a dated copy. Every schema it creates is dropped, and the
 * executor processes killed, also on failure or Ctrl-C.
 *
 * Flags and environment (--only, --size, --runs, --compare, …): bench/settings.ts.
 */
import { performance } from 'node:perf_hooks';
import { runCeiling, type CeilingResult } from './bench/ceiling.js';
import { describeEnvironment } from './bench/environment.js';
import { runFloor } from './bench/floor.js';
import { computeFigures, type RunResult } from './bench/figures.js';
import { isBusy, sampleLoad } from './bench/machineLoad.js';
import { Cleanup } from './bench/pg.js';
import { PGBOSS_CHAIN_WORK, PGBOSS_THROUGHPUT_WORK, runPgBoss } from './bench/pgboss.js';
import { formatReport, writeResults } from './bench/report.js';
import { runScale, type ScaleResult } from './bench/scale.js';
import { prepareOtherBuild } from './bench/otherBuild.js';
import { BENCH_USAGE, benchSettingsFrom, isFullRun, wantsHelp, type BenchSettings } from './bench/settings.js';
import { openStatementProbe, type StatementProbe } from './bench/statementStats.js';
import { runStepdScenarios, type Build, type StepdRunResult } from './bench/stepdRun.js';

const benchStart = performance.now();
function progress(msg: string): void {
  process.stderr.write(`bench [${((performance.now() - benchStart) / 1000).toFixed(0).padStart(3)} s] ${msg}\n`);
}

interface RunDeps {
  settings: BenchSettings;
  cleanup: Cleanup;
  /** This tree, then the compared build if any. */
  builds: Build[];
  statements?: StatementProbe;
}

async function oneRun(deps: RunDeps, run: number): Promise<RunResult> {
  const { settings, cleanup } = deps;
  const tag = `run ${run + 1}/${settings.runs}`;
  const before = await sampleLoad(settings.databaseUrl);
  if (isBusy(before)) {
    progress(`${tag}: the machine is busy (${before.backgroundBusyPercent.toFixed(0)} % CPU used by others, ${before.otherActive} other active PostgreSQL sessions): figures will suffer`);
  }
  // With a compared build, the two alternate: this tree first in odd runs, second in even ones.
  const order = run % 2 === 0 ? deps.builds : [...deps.builds].reverse();
  const results = new Map<Build, StepdRunResult>();
  for (const build of order) {
    const label = deps.builds.length > 1 ? ` [${build.label}]` : '';
    results.set(build, await runStepdScenarios({
      settings, cleanup, build, ...(deps.statements ? { statements: deps.statements } : {}),
      progress: (m) => progress(`${tag} stepd${label} ${m}`),
    }));
  }
  const stepd = results.get(deps.builds[0]!)!;
  const compared = deps.builds[1] ? results.get(deps.builds[1]) : undefined;
  const errors: RunResult['errors'] = [];
  /** A failed peer measurement is recorded; the run goes on. */
  const peer = async <T>(scenario: string, what: string, fn: () => Promise<T>): Promise<T | undefined> => {
    if (cleanup.closing) throw new Error('interrupted');
    progress(`${tag} ${what}`);
    try {
      return await fn();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      progress(`${tag} ${scenario} failed: ${message}`);
      errors.push({ scenario, message });
      return undefined;
    }
  };
  const floor = !settings.only.includes('floor') ? undefined : await peer('floor', `floor (${settings.sizes.floor} workflows and ${settings.sizes.floorHops} hops, bare and stepd's schema, twice each)`, () =>
    runFloor({ url: settings.databaseUrl, cleanup, workflows: settings.sizes.floor, hops: settings.sizes.floorHops }),
  );
  const ceiling: CeilingResult[] = [];
  for (const clients of settings.only.includes('ceiling') ? settings.ceilingClients : []) {
    const c = await peer(`ceiling-${clients}`, `ceiling (${clients} client${clients > 1 ? 's' : ''}, ${settings.ceilingSeconds} s)`, () =>
      runCeiling({ url: settings.databaseUrl, cleanup, clients, seconds: settings.ceilingSeconds }),
    );
    if (c) ceiling.push(c);
  }
  const sustainedJobs = settings.only.includes('sustained') ? settings.sizes.sustained : undefined;
  const jobs = `${settings.sizes.throughput}${sustainedJobs !== undefined ? ` and ${sustainedJobs}` : ''} jobs`;
  const pgboss = !settings.only.includes('pgboss') ? undefined : await peer('pg-boss', `pg-boss (${jobs}, chain of ${settings.sizes.chain})`, () =>
    runPgBoss({
      url: settings.databaseUrl,
      cleanup,
      jobs: settings.sizes.throughput,
      ...(sustainedJobs !== undefined ? { sustainedJobs } : {}),
      chain: settings.sizes.chain,
      timeoutMs: settings.scenarioTimeoutMs,
    }),
  );
  const after = await sampleLoad(settings.databaseUrl);
  return { stepd, ...(compared ? { compared } : {}), ...(floor ? { floor } : {}), ceiling, ...(pgboss ? { pgboss } : {}), errors, load: { before, after } };
}

async function main(): Promise<void> {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(BENCH_USAGE);
    return;
  }
  const settings = benchSettingsFrom();
  const cleanup = new Cleanup();
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress(`${signal}: cleaning up (again to exit at once)`);
    void cleanup.runAll().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const env = await describeEnvironment(settings.databaseUrl);
    const builds: Build[] = [{ label: 'this tree' }];
    if (settings.compare) builds.push(await prepareOtherBuild(settings.compare, progress));
    const statements = await openStatementProbe(settings.databaseUrl);
    if (statements) {
      cleanup.add('close statement probe', () => statements.close());
      progress('pg_stat_statements is loaded: the executor\'s statements are counted per scenario');
    }
    const runs: RunResult[] = [];
    for (let i = 0; i < settings.runs; i++) runs.push(await oneRun({ settings, cleanup, builds, ...(statements ? { statements } : {}) }, i));
    let scale: ScaleResult | undefined;
    if (settings.only.includes('scale')) {
      try {
        progress(`scale: claim latency, then ${settings.sizes.scaleRows.toLocaleString('en-US')} finished rows and again`);
        scale = await runScale({
          url: settings.databaseUrl,
          cleanup,
          finishedRows: settings.sizes.scaleRows,
          batches: settings.runs,
          iterations: settings.claimIterations,
        });
      } catch (err) {
        if (cleanup.closing) throw err;
        progress(`scale failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const durationSeconds = (performance.now() - benchStart) / 1000;
    const figures = computeFigures(runs, scale);
    process.stdout.write(formatReport({ figures, env, settings, runs, scale, durationSeconds }));
    const files = writeResults(settings.outDir, {
      environment: env,
      settings,
      peers: { pgboss: { throughputWork: PGBOSS_THROUGHPUT_WORK, chainWork: PGBOSS_CHAIN_WORK } },
      durationSeconds,
      figures,
      scale,
      runs,
    }, env.date, isFullRun(settings) && !settings.compare);
    process.stdout.write(`  wrote ${files.join(' and ')}${files.length === 1 ? ' (latest.json is only written by full, unprofiled runs of every scenario)' : ''}\n`);
    const warnings = runs.flatMap((r) => [...r.stepd.executorLog, ...(r.compared?.executorLog ?? [])]);
    if (warnings.length > 0) progress(`the executor logged ${warnings.length} warning/error line(s); see runs[].stepd.executorLog in ${files[0]}`);
  } finally {
    await cleanup.runAll();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
