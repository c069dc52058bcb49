/**
 * One run of the stepd scenarios 1–4 against a fresh schema and a fresh executor process, then
 * the executor's idle CPU and memory (scenario 5's process figures). A scenario that fails is
 * recorded and the next one still runs (the executor is being changed while this harness is
 * used); if the executor process dies, the rest fail at once with its last log lines. The
 * schema is dropped and the process stopped at the end, whatever happened.
 */
import { migrate } from '../../src/db/migrate.js';
import { runChain, type ChainResult } from './chain.js';
import { ExecutorProcess } from './executorProcess.js';
import { runFanout, type FanoutResult } from './fanout.js';
import { withResources, type ScenarioResources } from './machineLoad.js';
import { clientPool, dropSchemaLater, newSchemaName, sleep, type Cleanup } from './pg.js';
import type { BenchSettings } from './settings.js';
import { warmUp, type StepdContext } from './stepdScenario.js';
import { runThroughput, type ThroughputResult } from './throughput.js';
import { runWakeup, type WakeupResult } from './wakeup.js';

export type StepdScenario = 'throughput' | 'chain' | 'fanout' | 'wakeup';

export interface StepdRunResult {
  throughput?: ThroughputResult;
  chain?: ChainResult;
  fanout?: FanoutResult;
  wakeup?: WakeupResult;
  /** Executor CPU while idle (no work, nothing arriving), % of one core. */
  idleCpuPercent?: number;
  /** Executor CPU over its whole life in this run (start-up to the end of the idle window), seconds. */
  totalCpuSeconds?: number;
  peakRssMiB?: number;
  rssMiB?: number;
  /** Wall time, executor CPU and machine CPU of each scenario that ran. */
  resources: Partial<Record<StepdScenario, ScenarioResources>>;
  /** Scenarios that failed, with why. */
  errors: { scenario: string; message: string }[];
  /** Warning/error lines the executor logged during the run. */
  executorLog: string[];
}

export async function runStepdScenarios(settings: BenchSettings, cleanup: Cleanup, progress: (msg: string) => void): Promise<StepdRunResult> {
  const url = settings.databaseUrl;
  const schema = newSchemaName('stepd');
  const drop = dropSchemaLater(cleanup, url, schema);
  const db = clientPool(url, 4);
  const closeDb = cleanup.add('close client pool', () => db.end());
  let executor: ExecutorProcess | undefined;
  const out: StepdRunResult = { resources: {}, errors: [], executorLog: [] };
  try {
    await migrate({ url, schema });
    const exec = (executor = new ExecutorProcess({ url, schema, cleanup, ...(settings.profileDir ? { profileDir: settings.profileDir } : {}) }));
    const ctx: StepdContext = { url, schema, db, executor: exec, timeoutMs: settings.scenarioTimeoutMs };
    await warmUp(ctx);
    const s = settings.sizes;
    const scenario = async <K extends StepdScenario>(key: K, what: string, fn: () => Promise<NonNullable<StepdRunResult[K]>>) => {
      if (cleanup.closing) throw new Error('interrupted');
      progress(what);
      try {
        exec.assertAlive();
        const { result, resources } = await withResources(exec, fn);
        out[key] = result as StepdRunResult[K];
        out.resources[key] = resources;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        progress(`${key} failed: ${message}`);
        out.errors.push({ scenario: key, message });
      }
    };
    await scenario('throughput', `throughput (${s.throughput} workflows)`, () => runThroughput(ctx, s.throughput));
    await scenario('chain', `chain (${s.chain} steps)`, () => runChain(ctx, s.chain));
    await scenario('fanout', `fan-out (${s.fanout} items)`, () => runFanout(ctx, s.fanout));
    await scenario('wakeup', `wake-up (${s.gates} gates)`, () => runWakeup(ctx, s.gates));
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
    exec.assertAlive();
  } catch (err) {
    out.errors.push({ scenario: 'executor', message: err instanceof Error ? err.message : String(err) });
  } finally {
    out.executorLog = executor?.logTail ?? [];
    await executor?.close();
    await closeDb();
    await drop();
  }
  return out;
}
