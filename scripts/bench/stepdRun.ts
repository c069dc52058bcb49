/**
 * One run of the selected stepd scenarios against a fresh schema. Scenarios 1–4, the idle
 * window and the large fan-out share one executor process with its default settings (the idle
 * window gives the executor's idle CPU and its peak RSS over scenarios 1–4; the large fan-out
 * measures its own peak RSS). The io scenario gets an executor of its own, started with an
 * explicit --concurrency, since its ideal depends on it. A scenario that fails is recorded and
 * the next one still runs (the executor is being changed while this harness is used); if the
 * executor process dies, the rest fail at once with its last log lines. The schema is dropped
 * and the processes stopped at the end, whatever happened.
 *
 * `build` runs another build's executor (bench --compare): its own `stepd migrate` creates the
 * schema, so its own migrations apply.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { migrate } from '../../src/db/migrate.js';
import { runChain, type ChainResult } from './chain.js';
import { BackendCpuProbe } from './backendCpu.js';
import { freePort, scrapeMetrics } from './executorAccounting.js';
import { ExecutorProcess } from './executorProcess.js';
import { runFanout, type FanoutResult } from './fanout.js';
import { runGateRace, type GateRaceResult } from './gateRace.js';
import { runWorkers, startWorkerProcesses, WORKERS_CONFIG, type WorkersResult } from './workerScenario.js';
import { runIoBound, type IoBoundResult } from './ioBound.js';
import { runKeyed, type KeyedResult } from './keyed.js';
import { withResources, type ScenarioResources } from './machineLoad.js';
import { checkpointsSoFar } from './checkpoints.js';
import { clientPool, dropSchemaLater, newSchemaName, sleep, type Cleanup } from './pg.js';
import type { BenchSettings, ScenarioName } from './settings.js';
import type { StatementProbe } from './statementStats.js';
import { warmUp, type StepdContext } from './stepdScenario.js';
import { runThroughput, warmUpThroughput, type ThroughputResult } from './throughput.js';
import { runSignalBurst, type SignalBurstResult } from './signalBurst.js';
import { runWakeup, type WakeupResult } from './wakeup.js';

export type StepdScenario = 'throughput' | 'sustained' | 'chain' | 'fanout' | 'fanoutFirst' | 'wakeup' | 'signals' | 'gateRace' | 'fanoutLarge' | 'io' | 'workers' | 'keyed';

export interface StepdRunResult {
  /** Which code ran: 'this tree' or the compared git ref. */
  build: string;
  throughput?: ThroughputResult;
  sustained?: ThroughputResult;
  chain?: ChainResult;
  fanout?: FanoutResult;
  /** The same forEach with `complete: "first"`: joins after the first item, cancelling the rest. */
  fanoutFirst?: FanoutResult;
  wakeup?: WakeupResult;
  signals?: SignalBurstResult;
  gateRace?: GateRaceResult;
  fanoutLarge?: FanoutResult & { peakRssMiB?: number };
  io?: IoBoundResult;
  keyed?: KeyedResult;
  workers?: WorkersResult;
  /** Executor CPU while idle (no work, nothing arriving), % of one core. */
  idleCpuPercent?: number;
  /** Executor CPU over its whole life until the end of the idle window, seconds. */
  totalCpuSeconds?: number;
  /** Peak RSS over scenarios 1–4 (read at the end of the idle window). */
  peakRssMiB?: number;
  rssMiB?: number;
  /** Wall time, executor CPU and machine CPU of each scenario that ran. */
  resources: Partial<Record<StepdScenario, ScenarioResources>>;
  /** Scenarios that failed, with why. */
  errors: { scenario: string; message: string }[];
  /** Warning/error lines the executors logged during the run. */
  executorLog: string[];
}

export interface Build {
  label: string;
  /** That build's dist/src/cli.js; this tree's when absent. */
  cli?: string;
}

const SHARED_EXECUTOR: ScenarioName[] = ['throughput', 'sustained', 'chain', 'foreach1k', 'foreach1kFirst', 'wakeup', 'signals', 'gaterace', 'idle', 'foreach10k', 'keys'];

async function migrateWith(build: Build, url: string, schema: string): Promise<void> {
  if (!build.cli) {
    await migrate({ url, schema });
    return;
  }
  await promisify(execFile)(process.execPath, [build.cli, 'migrate', '--database-url', url, '--schema', schema], { timeout: 120_000 });
}

export async function runStepdScenarios(opts: {
  settings: BenchSettings;
  cleanup: Cleanup;
  progress: (msg: string) => void;
  build: Build;
  statements?: StatementProbe;
}): Promise<StepdRunResult> {
  const { settings, cleanup, progress, build } = opts;
  const url = settings.databaseUrl;
  const schema = newSchemaName('stepd');
  const drop = dropSchemaLater(cleanup, url, schema);
  const db = clientPool(url, 4);
  const closeDb = cleanup.add('close client pool', () => db.end());
  const out: StepdRunResult = { build: build.label, resources: {}, errors: [], executorLog: [] };
  const selected = (n: ScenarioName) => settings.only.includes(n);
  const s = settings.sizes;
  const startExecutor = async (extra: { concurrency?: number; executorId?: string; config?: unknown } = {}) =>
    new ExecutorProcess({
      url, schema, cleanup, ...extra,
      ...(settings.accounting ? { httpPort: await freePort() } : {}),
      ...(settings.profileDir ? { profileDir: settings.profileDir } : {}),
      ...(build.cli ? { cli: build.cli } : {}),
    });
  /** Runs one scenario on `ctx`, recording its result and resources, or its failure. */
  const scenario = async <K extends StepdScenario>(ctx: StepdContext, key: K, what: string, fn: () => Promise<NonNullable<StepdRunResult[K]>>) => {
    if (cleanup.closing) throw new Error('interrupted');
    progress(what);
    try {
      ctx.executor.assertAlive();
      const port = ctx.executor.httpPort;
      const { result, resources } = await withResources(ctx.executor, fn, {
        ...(opts.statements ? { statements: { probe: opts.statements, harnessMarker: schema } } : {}),
        ...(port !== undefined ? { scrape: () => scrapeMetrics(port) } : {}),
        backends: new BackendCpuProbe({ query: (text, values) => db.query(text, values), clientPid: ctx.executor.pid }),
        checkpoints: () => checkpointsSoFar((text) => db.query(text)),
      });
      out[key] = result as StepdRunResult[K];
      out.resources[key] = resources;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      progress(`${key} failed: ${message}`);
      out.errors.push({ scenario: key, message });
    }
  };
  const executors: ExecutorProcess[] = [];
  try {
    await migrateWith(build, url, schema);
    if (SHARED_EXECUTOR.some(selected)) {
      // The large fan-out has more step rows (items + fork + join) than the default cap of 10,000
      // per workflow allows; caps only decide which flows are admitted.
      const exec = await startExecutor(selected('foreach10k') ? { config: { caps: { steps: s.fanoutLarge + 10 } } } : {});
      executors.push(exec);
      const ctx: StepdContext = { url, schema, db, executor: exec, timeoutMs: settings.scenarioTimeoutMs };
      await warmUp(ctx);
      if (selected('throughput')) {
        await warmUpThroughput(ctx, s.throughput);
        await scenario(ctx, 'throughput', `throughput (${s.throughput} workflows)`, () => runThroughput(ctx, s.throughput));
      }
      if (selected('sustained')) {
        await scenario(ctx, 'sustained', `sustained throughput (${s.sustained} workflows)`, () => runThroughput(ctx, s.sustained, 'bench-sustained'));
      }
      if (selected('chain')) await scenario(ctx, 'chain', `chain (${s.chain} steps)`, () => runChain(ctx, s.chain));
      if (selected('foreach1k')) await scenario(ctx, 'fanout', `fan-out (${s.fanout} items)`, () => runFanout(ctx, s.fanout));
      if (selected('foreach1kFirst')) {
        await scenario(ctx, 'fanoutFirst', `fan-out + first (${s.fanout} items)`, () => runFanout(ctx, s.fanout, 'bench-fanout-first', 'first'));
      }
      if (selected('wakeup')) await scenario(ctx, 'wakeup', `wake-up (${s.gates} gates)`, () => runWakeup(ctx, s.gates));
      if (selected('signals')) {
        await scenario(ctx, 'signals', `signals (${s.signals} waiting workflows, ${s.signalsPerSecond} signals/s)`, () => runSignalBurst(ctx, s.signals, s.signalsPerSecond));
      }
      if (selected('gaterace')) {
        await scenario(ctx, 'gateRace', `racing clients (${s.raceGates} gates, 4 clients at ${s.racePerSecond}/s each)`, () => runGateRace(ctx, s.raceGates, s.racePerSecond));
      }
      if (selected('keys')) await scenario(ctx, 'keyed', `keyed (${s.keys} keys × limit 1, ${s.perKey} workflows each)`, () => runKeyed(ctx, s.keys, s.perKey));
      if (selected('idle')) {
        exec.assertAlive();
        progress(`idle (${settings.idleSeconds} s)`);
        await sleep(1_000);
        const cpu0 = exec.cpuSeconds();
        const t0 = performance.now();
        await sleep(settings.idleSeconds * 1_000);
        const cpu1 = exec.cpuSeconds();
        out.idleCpuPercent = ((cpu1 - cpu0) / ((performance.now() - t0) / 1000)) * 100;
        out.totalCpuSeconds = cpu1;
        Object.assign(out, exec.memory());
      }
      if (selected('foreach10k')) {
        const reset = exec.resetPeakRss();
        await scenario(ctx, 'fanoutLarge', `fan-out (${s.fanoutLarge} items)`, async () => ({
          ...(await runFanout(ctx, s.fanoutLarge, 'bench-foreach-large')),
          ...(reset ? { peakRssMiB: exec.memory().peakRssMiB } : {}),
        }));
      }
      exec.assertAlive();
      await exec.close();
    }
    if (selected('io')) {
      const exec = await startExecutor({ concurrency: settings.ioConcurrency, executorId: 'bench-io' });
      executors.push(exec);
      const ctx: StepdContext = { url, schema, db, executor: exec, timeoutMs: settings.scenarioTimeoutMs };
      await warmUp(ctx);
      await scenario(ctx, 'io', `io (${s.io} workflows × 3 steps of ${settings.ioSleepMs} ms, concurrency ${settings.ioConcurrency})`, () =>
        runIoBound(ctx, { workflows: s.io, concurrency: settings.ioConcurrency, sleepMs: settings.ioSleepMs }),
      );
      exec.assertAlive();
      // Stopped before the workers scenario: an executor without its `workers` config would
      // claim the worker steps and fail them as unknown tools.
      await exec.close();
    }
    if (selected('workers')) {
      const exec = await startExecutor({ executorId: 'bench-workers', config: WORKERS_CONFIG });
      executors.push(exec);
      const ctx: StepdContext = { url, schema, db, executor: exec, timeoutMs: settings.scenarioTimeoutMs };
      await warmUp(ctx);
      const { workerProcesses: processes, workerConcurrency: concurrency } = settings;
      progress(`starting ${processes} worker processes × ${concurrency}`);
      const stopWorkers = await startWorkerProcesses({ url, schema, count: processes, concurrency, cleanup, ...(build.cli ? { cli: build.cli } : {}) });
      try {
        await scenario(ctx, 'workers', `workers (${s.workers} steps of ${settings.ioSleepMs} ms on ${processes} workers × ${concurrency}; chains of ${s.workerChain})`, () =>
          runWorkers(ctx, { processes, concurrency, sleepMs: settings.ioSleepMs, workflows: s.workers, chain: s.workerChain }),
        );
      } finally {
        await stopWorkers();
      }
      exec.assertAlive();
    }
  } catch (err) {
    out.errors.push({ scenario: 'executor', message: err instanceof Error ? err.message : String(err) });
  } finally {
    for (const e of executors) {
      out.executorLog.push(...e.logTail);
      await e.close();
    }
    await closeDb();
    await drop();
  }
  return out;
}
