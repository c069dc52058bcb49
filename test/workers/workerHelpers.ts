/**
 * Real worker processes for the worker-contract tests: Python (python3-psycopg2) and psql workers,
 * Debian's pgbouncer in transaction mode, the code blocks of docs/workers.md, and executors
 * spawned with a `workers` config. Every process is killed after its test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach } from 'vitest';
import { onCleanup, waitFor, type TestSchema } from '../helpers/db.js';
import { cleanEnv, tempDirSync } from '../helpers/isolation.js';
import { freePort } from '../helpers/ports.js';
import { spawnExecutor, type ExecutorProcess } from '../helpers/processes.js';
import { createLoginRole } from '../security/helpers.js';

export const PYTHON_WORKER = fileURLToPath(new URL('./fixtures/test_worker.py', import.meta.url));
/** Debian's python3, which has python3-psycopg2 (a pyenv shim first on PATH may not). */
export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
export const WORKERS_DOC = fileURLToPath(new URL('../../docs/workers.md', import.meta.url));

const children = new Set<ChildProcess>();
afterEach(async () => {
  const all = [...children];
  children.clear();
  await Promise.all(
    all.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGKILL');
        }),
    ),
  );
});

/** A child process killed after the test; its output kept for failure messages. */
export interface Proc {
  child: ChildProcess;
  output(): string;
  kill(sig?: NodeJS.Signals): Promise<void>;
}

export function startProc(cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Proc {
  const child = spawn(cmd, args, { cwd: opts.cwd ?? tempDirSync('stepd-worker-'), env: { ...cleanEnv({}), ...(opts.env ?? {}) }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let text = '';
  child.stdout!.on('data', (c: Buffer) => (text += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (text += c.toString('utf8')));
  return {
    child,
    output: () => text,
    kill: (sig = 'SIGKILL') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(sig);
      }),
  };
}

/** A fresh LOGIN role granted `<schema>_worker`, and its URL. */
export async function workerRole(t: TestSchema): Promise<{ role: string; url: string }> {
  return createLoginRole(t, `${t.schema}_worker`, `wrk_${randomBytes(5).toString('hex')}`);
}

/** One test Python worker (fixtures/test_worker.py); its log lines are `taken|done|stale <step_id> <key>`. */
export interface PythonWorker extends Proc {
  lines(): string[];
}

export async function startPythonWorker(
  t: TestSchema,
  url: string,
  opts: { mode?: 'normal' | 'hang'; lease?: string; max?: number; listen?: boolean } = {},
): Promise<PythonWorker> {
  const dir = tempDirSync('stepd-pyworker-');
  const log = path.join(dir, 'worker.log');
  writeFileSync(log, '');
  const p = startProc(PYTHON, [PYTHON_WORKER], {
    cwd: dir,
    env: {
      STEPD_WORKER_URL: url,
      STEPD_SCHEMA: t.schema,
      WORKER_LOG: log,
      WORKER_MODE: opts.mode ?? 'normal',
      WORKER_LEASE: opts.lease ?? '30 seconds',
      WORKER_MAX: String(opts.max ?? 20),
      WORKER_LISTEN: opts.listen ? '1' : '0',
    },
  });
  const lines = () => readFileSync(log, 'utf8').split('\n').filter((l) => l.length > 0);
  await waitFor(() => lines().includes('ready') || p.child.exitCode !== null, 'the python worker to connect');
  if (p.child.exitCode !== null) throw new Error(`python worker exited: ${p.output()}`);
  return { ...p, lines };
}

/** Writes a stepd.config.json with `workers` (and more) into a fresh folder; returns its path. */
export function workersConfigFile(config: Record<string, unknown>): string {
  const file = path.join(tempDirSync('stepd-config-'), 'stepd.config.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

/** An executor process (`stepd start`) with this config. */
export function spawnWorkerExecutor(t: TestSchema, executorId: string, config: Record<string, unknown>, concurrency = 8): Promise<ExecutorProcess> {
  return spawnExecutor(t, { executorId, concurrency, extraArgs: ['--config', workersConfigFile(config)] });
}

/** The code block that follows `<!-- docs-test: NAME -->` in docs/workers.md, as written. */
export function docsBlock(name: string): string {
  const text = readFileSync(WORKERS_DOC, 'utf8');
  const marker = `<!-- docs-test: ${name} -->`;
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`docs/workers.md has no block ${name}`);
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(text.slice(at + marker.length));
  if (!m) throw new Error(`docs/workers.md: no code block after ${marker}`);
  return m[1]!;
}

/**
 * Debian's pgbouncer in transaction mode on a free port, in front of 127.0.0.1:5432 (trust auth),
 * stopped after the test. Returns the URL of `role` through it.
 */
export async function startPgbouncer(role: string, database: string): Promise<{ url: string; port: number }> {
  const bin = '/usr/sbin/pgbouncer';
  if (!existsSync(bin)) throw new Error('pgbouncer is not installed (/usr/sbin/pgbouncer)');
  const dir = tempDirSync('stepd-pgbouncer-');
  const port = await freePort();
  const users = path.join(dir, 'userlist.txt');
  writeFileSync(users, `"${role}" ""\n`);
  const ini = path.join(dir, 'pgbouncer.ini');
  writeFileSync(
    ini,
    [
      '[databases]',
      `${database} = host=127.0.0.1 port=5432 dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      `unix_socket_dir = ${dir}`,
      'auth_type = trust',
      `auth_file = ${users}`,
      'pool_mode = transaction',
      'max_client_conn = 200',
      'default_pool_size = 4',
      'ignore_startup_parameters = extra_float_digits,options',
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  const p = startProc(bin, [ini], { cwd: dir });
  onCleanup(() => p.kill('SIGTERM'));
  const url = `postgres://${role}@127.0.0.1:${port}/${database}`;
  await waitFor(async () => {
    if (p.child.exitCode !== null) throw new Error(`pgbouncer exited: ${p.output()} ${readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8')}`);
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => {});
    }
  }, 'pgbouncer to accept connections');
  return { url, port };
}

