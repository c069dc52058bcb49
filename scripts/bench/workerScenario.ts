/**
 * Scenario 6b, workers: P worker processes (the SDK, workerProcess.ts), each running C tasks at
 * once, serve `bench.sleep` (20 ms) through the SQL worker contract; the executor only hands the
 * steps over and records what the workers report. N one-step workflows inserted at once:
 * ideal = P × C ÷ 20 ms steps/s, and the share of it is what the worker path costs between two
 * waits (hand-off, NOTIFY, take, finish, the executor recording the result).
 *
 * The added latency per step: a chain of K worker steps against a chain of K `core.sleep` steps
 * (in the executor's process) of the same 20 ms, one workflow each, nothing else running:
 * (worker chain − in-process chain) ÷ K.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MS_BETWEEN, type Cleanup } from './pg.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface WorkersResult {
  processes: number;
  concurrency: number;
  sleepMs: number;
  steps: number;
  elapsedMs: number;
  stepsPerSec: number;
  /** processes × concurrency ÷ sleepMs. */
  idealStepsPerSec: number;
  shareOfIdeal: number;
  chain: { steps: number; workerMsPerStep: number; inProcessMsPerStep: number; addedMsPerStep: number };
  timedOut: boolean;
}

/** The executor's config for this scenario: `bench.*` is served by workers. */
export const WORKERS_CONFIG = { workers: { bench: {} } };

/** The worker program of the build being measured (`cli`: that build's dist/src/cli.js; this tree's when absent), so a compared build runs its own SDK. */
function workerProgram(cli?: string): string {
  const own = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'workerProcess.js');
  if (!cli) return own;
  const theirs = path.resolve(path.dirname(cli), '..', 'scripts', 'bench', 'workerProcess.js');
  return existsSync(theirs) ? theirs : own;
}

/** Starts `count` worker processes and waits until each has taken once; they stop with the cleanup. */
export async function startWorkerProcesses(opts: { url: string; schema: string; count: number; concurrency: number; cleanup: Cleanup; cli?: string }): Promise<() => Promise<void>> {
  const children: ChildProcess[] = [];
  const readies: Promise<void>[] = [];
  for (let i = 0; i < opts.count; i++) {
    const child = spawn(process.execPath, [workerProgram(opts.cli)], {
      env: { ...process.env, STEPD_LOG_LEVEL: 'warn', BENCH_WORKER_URL: opts.url, BENCH_WORKER_SCHEMA: opts.schema, BENCH_WORKER_CONCURRENCY: String(opts.concurrency) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    readies.push(
      new Promise((resolve, reject) => {
        child.stdout!.on('data', (c: Buffer) => (c.toString().includes('ready') ? resolve() : undefined));
        child.once('exit', (code) => reject(new Error(`a bench worker exited (code ${code}) before it was ready`)));
      }),
    );
  }
  const stop = async () => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
            c.once('exit', () => (clearTimeout(timer), resolve()));
            c.kill('SIGTERM');
          }),
      ),
    );
  };
  const remove = opts.cleanup.add(`stop ${opts.count} bench workers`, stop);
  try {
    await Promise.all(readies);
  } catch (err) {
    await remove();
    throw err;
  }
  return remove;
}

const sleepFlow = (tool: string, sleepMs: number, steps: number) => ({
  start: 's1',
  steps: Object.fromEntries(
    Array.from({ length: steps }, (_, i) => [`s${i + 1}`, { tool, args: { ms: sleepMs }, ...(i + 1 < steps ? { next: `s${i + 2}` } : { done: true }) }]),
  ),
});

/** One workflow of a chain of `steps` steps; its run time from the rows, per step. */
async function chainMsPerStep(ctx: StepdContext, name: string, tool: string, sleepMs: number, steps: number): Promise<number> {
  const { workflows } = tables(ctx.schema);
  const ids = await insertWorkflows(ctx, name, sleepFlow(tool, sleepMs, steps), 1);
  await waitForWorkflows(ctx, name);
  const [r] = await query<{ ms: number }>(ctx, `SELECT ${MS_BETWEEN('started_at', 'completed_at')} AS ms FROM ${workflows} WHERE id = $1`, [ids.first]);
  return r!.ms / steps;
}

export async function runWorkers(ctx: StepdContext, opts: { processes: number; concurrency: number; sleepMs: number; workflows: number; chain: number }): Promise<WorkersResult> {
  const { workflows, steps } = tables(ctx.schema);
  // The latency first, while nothing else runs.
  const workerMsPerStep = await chainMsPerStep(ctx, 'bench-workers-chain', 'bench.sleep', opts.sleepMs, opts.chain);
  const inProcessMsPerStep = await chainMsPerStep(ctx, 'bench-inprocess-chain', 'core.sleep', opts.sleepMs, opts.chain);
  const ids = await insertWorkflows(ctx, 'bench-workers', sleepFlow('bench.sleep', opts.sleepMs, 1), opts.workflows);
  const { timedOut } = await waitForWorkflows(ctx, 'bench-workers');
  const [r] = await query<{ elapsed_ms: number; done: number }>(
    ctx,
    `SELECT ${MS_BETWEEN('(SELECT min(created_at) FROM ' + workflows + ' WHERE id BETWEEN $1 AND $2)', 'max(completed_at)')} AS elapsed_ms, count(*)::int AS done
       FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2 AND status = 'done'`,
    [ids.first, ids.last],
  );
  const stepsPerSec = (r!.done / r!.elapsed_ms) * 1000;
  const idealStepsPerSec = (opts.processes * opts.concurrency) / (opts.sleepMs / 1000);
  return {
    processes: opts.processes,
    concurrency: opts.concurrency,
    sleepMs: opts.sleepMs,
    steps: r!.done,
    elapsedMs: r!.elapsed_ms,
    stepsPerSec,
    idealStepsPerSec,
    shareOfIdeal: stepsPerSec / idealStepsPerSec,
    chain: { steps: opts.chain, workerMsPerStep, inProcessMsPerStep, addedMsPerStep: workerMsPerStep - inProcessMsPerStep },
    timedOut,
  };
}
