/**
 * Runs the built CLI (dist/src/cli.js, built by `npm test` before vitest) as a user would: a
 * child process with its own environment and working folder. Every child is killed after its
 * test; helpers wait on output, never on fixed sleeps.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, TEST_DATABASE_URL, type TestSchema } from '../helpers/db.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = path.join(ROOT, 'dist', 'src', 'cli.js');
export const EXAMPLES = path.join(ROOT, 'examples');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Replaces the inherited DATABASE_URL / STEPD_* variables (which are always removed). */
  env?: Record<string, string>;
  cwd?: string;
}

/** The environment of a child: the test's own, minus anything that would pick a database. */
export function childEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(DATABASE_URL|STEPD_|PG)/.test(k)) out[k] = v;
  }
  return { ...out, STEPD_LOG_LEVEL: 'warn', ...env };
}

/** DATABASE_URL and STEPD_SCHEMA of a test schema. */
export function envFor(t: TestSchema): Record<string, string> {
  return { DATABASE_URL: t.url, STEPD_SCHEMA: t.schema };
}

export class CliProcess {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<CliResult>;
  private readonly waiters = new Set<() => void>();

  constructor(args: string[], opts: CliOptions = {}) {
    this.child = spawn(process.execPath, [CLI, ...args], {
      cwd: opts.cwd ?? ROOT,
      env: childEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString('utf8');
      this.notify();
    });
    this.child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('utf8');
      this.notify();
    });
    this.exited = new Promise((resolve) => {
      this.child.once('close', (code, signal) => {
        this.notify();
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
      });
    });
    onCleanup(async () => {
      await this.kill('SIGKILL');
    });
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the first match of `pattern` in stdout (or stderr); fails if the process exits first. */
  waitFor(pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout', timeoutMs = 30_000): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`timed out waiting for ${pattern} on ${stream}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)), timeoutMs);
      const check = () => {
        const match = this[stream].match(pattern);
        if (match) return done(undefined, match);
        if (!this.running) done(new Error(`process exited (${this.child.exitCode ?? this.child.signalCode}) before ${pattern} appeared on ${stream}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`));
      };
      const done = (err?: Error, match?: RegExpMatchArray) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve(match!);
      };
      this.waiters.add(check);
      check();
    });
  }

  async kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<CliResult> {
    if (this.running) this.child.kill(signal);
    return this.exited;
  }
}

export function spawnCli(args: string[], opts: CliOptions = {}): CliProcess {
  return new CliProcess(args, opts);
}

/** Runs a CLI command to its end. */
export async function runCli(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return spawnCli(args, opts).exited;
}

/** A fresh folder, removed after the test; world-enterable like a checkout (the embedded server may run as another user). */
export async function tempDir(prefix = 'stepd-cli-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  await chmod(dir, 0o755);
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a flow (or any JSON) to a file in a temp folder and returns its path. */
export async function writeJson(value: unknown, name = 'flow.json'): Promise<string> {
  const file = path.join(await tempDir(), name);
  await writeFile(file, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return file;
}

/** The JSON objects of a --json stream, one per line. */
export function jsonLines(stdout: string): Record<string, any>[] {
  return stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, any>);
}

export { TEST_DATABASE_URL };
