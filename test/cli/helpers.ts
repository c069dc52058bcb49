/**
 * Runs the built CLI (dist/src/cli.js, built by `npm test` before vitest) as a user would: a
 * child process with its own environment (none of the user's DATABASE_URL, STEPD_* or PG*) and
 * working folder (default: an empty one, so no stepd.config.json around the tests is read). Every
 * child is killed after its test; helpers wait on output, never on fixed sleeps.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, TEST_DATABASE_URL, type TestSchema } from '../helpers/db.js';
import { cleanEnv, tempDirSync } from '../helpers/isolation.js';
import { createLoginRole, schemaRoles } from '../security/helpers.js';

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
  /** Default: an empty folder of its own. */
  cwd?: string;
  /** The program and its first arguments, to which `args` are added (default: node dist/src/cli.js). */
  command?: string[];
  /** Its own process group (as a terminal's foreground job): signal it whole with `process.kill(-pid, …)`. */
  detached?: boolean;
}

/** The environment of a child: the test's own, minus anything that would pick a database. */
export function childEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  return cleanEnv({ STEPD_LOG_LEVEL: 'warn', ...env });
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
    const [program, ...first] = opts.command ?? [process.execPath, CLI];
    this.child = spawn(program!, [...first, ...args], {
      cwd: opts.cwd ?? tempDirSync('stepd-cli-cwd-'),
      env: childEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.detached ? { detached: true } : {}),
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
    const group = opts.detached ? this.child.pid : undefined;
    onCleanup(async () => {
      if (group !== undefined) {
        try {
          process.kill(-group, 'SIGKILL');
        } catch {
          // the group is gone
        }
      }
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

// ---------------------------------------------------------------------------------------------
// Processes, judged by their pids (never by how long something took)

/** Whether `pid` is a live process (a zombie counts as gone). */
export async function isAlive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return false;
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** The postmaster pid of the embedded PostgreSQL in `dataDir`, if its postmaster.pid exists. */
export async function postmasterPid(dataDir: string): Promise<number | undefined> {
  const text = await readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(text?.split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Live processes whose command line contains `text` (a data directory, a folder). */
export async function processesNaming(text: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(text) && (await isAlive(Number(entry)))) pids.push(Number(entry));
  }
  return pids;
}

/** A LOGIN role granted the schema's client role, and the environment that connects the CLI as it. */
export async function clientEnv(t: TestSchema, name: string): Promise<{ role: string; env: Record<string, string> }> {
  const { role, url } = await createLoginRole(t, schemaRoles(t.schema).client, `${name}_${t.schema.slice(2, 8)}`);
  return { role, env: { DATABASE_URL: url, STEPD_SCHEMA: t.schema } };
}
