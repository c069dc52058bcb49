/**
 * `npm run bench`: the performance benchmark of issue 5.
 *
 * Per run: stepd scenarios 1–4 (fresh schema, a stepd executor in its own process with its
 * default settings, everything driven through SQL from here), the executor's idle CPU and
 * memory, the pgbench-style ceiling (1 and 8 clients) and pg-boss doing scenarios 1 and 2.
 * Once: the claim statement's latency with 0 and with 1,000,000 finished step rows.
 * Prints a table (median and min–max over BENCH_RUNS runs, ratios to the peers, targets) and
 * writes bench-results/latest.json plus a dated copy. Every schema it creates is dropped, and
 * the executor process killed, also on failure or Ctrl-C.
 *
 * Environment: BENCH_DATABASE_URL, BENCH_RUNS (default 3), BENCH_QUICK=1 (reduced sizes),
 * BENCH_PROFILE=1 (CPU-profile the executor; see bench/settings.ts).
 */
import { performance } from 'node:perf_hooks';
import { runCeiling, type CeilingResult } from './bench/ceiling.js';
import { describeEnvironment } from './bench/environment.js';
import { computeFigures, type RunResult } from './bench/figures.js';
import { isBusy, sampleLoad } from './bench/machineLoad.js';
import { Cleanup } from './bench/pg.js';
import { PGBOSS_CHAIN_WORK, PGBOSS_THROUGHPUT_WORK, runPgBoss } from './bench/pgboss.js';
import { formatReport, writeResults } from './bench/report.js';
import { runScale, type ScaleResult } from './bench/scale.js';
import { benchSettingsFrom, type BenchSettings } from './bench/settings.js';
import { runStepdScenarios } from './bench/stepdRun.js';

const benchStart = performance.now();
function progress(msg: string): void {
  process.stderr.write(`bench [${((performance.now() - benchStart) / 1000).toFixed(0).padStart(3)} s] ${msg}\n`);
}

async function oneRun(settings: BenchSettings, cleanup: Cleanup, run: number): Promise<RunResult> {
  const tag = `run ${run + 1}/${settings.runs}`;
  const before = await sampleLoad(settings.databaseUrl);
  if (isBusy(before)) {
    progress(`${tag}: the machine is busy (${before.backgroundBusyPercent.toFixed(0)} % CPU used by others, ${before.otherActive} other active PostgreSQL sessions): figures will suffer`);
  }
  const stepd = await runStepdScenarios(settings, cleanup, (m) => progress(`${tag} stepd ${m}`));
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
  const ceiling: CeilingResult[] = [];
  for (const clients of settings.ceilingClients) {
    const c = await peer(`ceiling-${clients}`, `ceiling (${clients} client${clients > 1 ? 's' : ''}, ${settings.ceilingSeconds} s)`, () =>
      runCeiling({ url: settings.databaseUrl, cleanup, clients, seconds: settings.ceilingSeconds }),
    );
    if (c) ceiling.push(c);
  }
  const pgboss = await peer('pg-boss', `pg-boss (${settings.sizes.throughput} jobs, chain of ${settings.sizes.chain})`, () =>
    runPgBoss({ url: settings.databaseUrl, cleanup, jobs: settings.sizes.throughput, chain: settings.sizes.chain, timeoutMs: settings.scenarioTimeoutMs }),
  );
  const after = await sampleLoad(settings.databaseUrl);
  return { stepd, ceiling, ...(pgboss ? { pgboss } : {}), errors, load: { before, after } };
}

async function main(): Promise<void> {
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
    const runs: RunResult[] = [];
    for (let i = 0; i < settings.runs; i++) runs.push(await oneRun(settings, cleanup, i));
    progress(`scale: claim latency, then ${settings.sizes.scaleRows.toLocaleString('en-US')} finished rows and again`);
    let scale: ScaleResult | undefined;
    try {
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
    }, env.date, !settings.quick && settings.profileDir === undefined);
    process.stdout.write(`  wrote ${files.join(' and ')}${files.length === 1 ? ' (latest.json is only written by full, unprofiled runs)' : ''}\n`);
    const warnings = runs.flatMap((r) => r.stepd.executorLog);
    if (warnings.length > 0) progress(`the executor logged ${warnings.length} warning/error line(s); see runs[].stepd.executorLog in ${files[0]}`);
  } finally {
    await cleanup.runAll();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
