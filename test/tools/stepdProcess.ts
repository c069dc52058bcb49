/**
 * The real `stepd` command as a child process (dist/src/cli.js, built by `npm test` or
 * `tsc -p tsconfig.json`): its output is collected, and a test waits on its exit or on a line.
 * It runs in `cwd` (default: an empty folder of its own) with none of the user's DATABASE_URL,
 * STEPD_* or PG* variables; `env` adds what the test means it to see.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cleanEnv, tempDirSync } from '../helpers/isolation.js';
import { waitFor } from './helpers.js';

export const STEPD_CLI = fileURLToPath(new URL('../../dist/src/cli.js', import.meta.url));

export interface StepdProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The parsed JSON log lines (stderr) so far; other lines are skipped. */
  logs(): Record<string, unknown>[];
  /** Sends SIGTERM (a graceful stop) unless it has already exited, and waits for the exit. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnStepd(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): StepdProcess {
  if (!existsSync(STEPD_CLI)) throw new Error(`${STEPD_CLI} is missing: build first (sh scripts/node22.sh npx tsc -p tsconfig.json)`);
  const child = spawn(process.execPath, [STEPD_CLI, ...args], {
    cwd: options.cwd ?? tempDirSync('stepd-cwd-'),
    env: cleanEnv({ STEPD_LOG_LEVEL: 'info', ...options.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  let exitState: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('close', (code, signal) => {
      exitState = { code, signal };
      resolve(exitState);
    });
  });
  const logs = () =>
    err.split('\n').flatMap((line) => {
      if (!line.startsWith('{')) return [];
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    logs,
    stop: async () => {
      if (!exitState) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Waits for a log line whose `msg` is `msg` and that `match` accepts; fails with the output so far. */
export async function waitForLog(
  proc: StepdProcess,
  msg: string,
  match: (line: Record<string, unknown>) => boolean = () => true,
): Promise<Record<string, unknown>> {
  try {
    return await waitFor(() => proc.logs().find((l) => l.msg === msg && match(l)), `stepd to log "${msg}"`, 20_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}; stderr so far:\n${proc.stderr()}`);
  }
}
