/**
 * Executors as child processes running the built CLI (dist/src/cli.js; `npm test` builds it,
 * or `sh scripts/node22.sh npx tsc -p tsconfig.json`). Every child is killed after the test,
 * passed or failed. Each runs in an empty folder of its own with none of the user's settings
 * (isolation.ts), so a stepd.config.json or STEPD_* variable around the tests changes nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { waitFor, type TestSchema } from './db.js';
import { cleanEnv, tempDirSync } from './isolation.js';

export const CLI = fileURLToPath(new URL('../../dist/src/cli.js', import.meta.url));

export interface ExecutorProcess {
  executorId: string;
  child: ChildProcess;
  /** Exit code and signal, once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
  /** Waits (bounded, like every wait here) for the process to exit; returns code and signal. */
  waitForExit(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The JSON log lines so far. */
  logs(): Record<string, unknown>[];
  output(): string;
  /** Waits for a log line with this `msg` (and matching `match`). */
  waitForLog(msg: string, match?: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  signal(sig: NodeJS.Signals): void;
}

const children = new Set<ExecutorProcess>();

// Should the test worker go away before afterEach runs, its executors go with it.
process.once('exit', () => {
  for (const p of children) if (!p.hasExited()) p.child.kill('SIGKILL');
});

afterEach(async () => {
  const all = [...children];
  children.clear();
  for (const p of all) if (!p.hasExited()) p.child.kill('SIGKILL');
  await Promise.all(all.map((p) => p.exited));
});

export interface SpawnOptions {
  executorId: string;
  concurrency?: number;
  leaseGrace?: string;
  shutdownGrace?: string;
  /** More flags for `stepd start` (e.g. --heartbeat-interval). */
  extraArgs?: string[];
  /** Wait for "executor started" before returning (default true). */
  waitUntilStarted?: boolean;
}

/** Starts `stepd start` against the test schema with fast intervals. */
export async function spawnExecutor(t: TestSchema, opts: SpawnOptions): Promise<ExecutorProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (sh scripts/node22.sh npx tsc -p tsconfig.json)`);
  const args = [
    CLI, 'start',
    '--database-url', t.url,
    '--schema', t.schema,
    '--executor-id', opts.executorId,
    '--poll-interval', '50ms',
    '--watchdog-interval', '100ms',
    '--lease-grace', opts.leaseGrace ?? '200ms',
    '--shutdown-grace', opts.shutdownGrace ?? '10s',
    '--concurrency', String(opts.concurrency ?? 8),
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(process.execPath, args, {
    cwd: tempDirSync('stepd-executor-'),
    env: cleanEnv({ STEPD_LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout!.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('close', (code, signal) => {
      done = true;
      resolve({ code, signal });
    });
  });
  const logs = () =>
    text.split('\n').flatMap((line) => {
      if (!line.startsWith('{')) return [];
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  const proc: ExecutorProcess = {
    executorId: opts.executorId,
    child,
    exited,
    hasExited: () => done,
    waitForExit: async () => {
      await waitFor(() => done, `executor ${opts.executorId} to exit`);
      return exited;
    },
    logs,
    output: () => text,
    waitForLog: async (msg, match = () => true) => {
      try {
        return await waitFor(() => {
          if (done) throw new Error(`executor ${opts.executorId} exited`);
          return logs().find((l) => l.msg === msg && match(l));
        }, `executor ${opts.executorId} to log "${msg}"`);
      } catch (err) {
        throw new Error(`${(err as Error).message}; output so far:\n${text}`);
      }
    },
    signal: (sig) => {
      if (!done) child.kill(sig);
    },
  };
  children.add(proc);
  if (opts.waitUntilStarted !== false) await proc.waitForLog('executor started');
  return proc;
}

/** Kills with SIGKILL and waits until PostgreSQL has dropped the process's connections. */
export async function killHard(t: TestSchema, proc: ExecutorProcess): Promise<void> {
  proc.signal('SIGKILL');
  await proc.exited;
  await waitFor(
    async () => {
      const rows = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [
        `stepd-executor:${proc.executorId}`,
      ]);
      return rows[0]!.n === 0;
    },
    `PostgreSQL to drop the connections of ${proc.executorId}`,
  );
}
