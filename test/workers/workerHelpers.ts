/**
 * Real worker processes for the worker-contract tests: Python (python3-psycopg2) and psql workers,
 * Debian's pgbouncer in transaction mode, the code blocks of docs/workers.md, and executors
 * spawned with a `workers` config. Every process is killed after its test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach, expect } from 'vitest';
import { insertWorkflow, onCleanup, waitFor, type TestSchema } from '../helpers/db.js';
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
export async function startPgbouncer(role: string, database: string): Promise<{ url: string; port: number; show: (what: string) => Promise<Record<string, unknown>[]> }> {
  const bin = '/usr/sbin/pgbouncer';
  if (!existsSync(bin)) throw new Error('pgbouncer is not installed (/usr/sbin/pgbouncer)');
  const dir = tempDirSync('stepd-pgbouncer-');
  // PgBouncer refuses to run as root: as root it is started as nobody, who writes its log and pid here.
  chmodSync(dir, 0o777);
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
      `admin_users = ${role}`,
      'max_client_conn = 200',
      'default_pool_size = 2',
      'ignore_startup_parameters = extra_float_digits,options',
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  const p = startProc(bin, [...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []), ini], { cwd: dir });
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
  // The admin console (simple queries only): SHOW POOLS, SHOW STATS.
  const show = async (what: string): Promise<Record<string, unknown>[]> => {
    const c = new pg.Client({ connectionString: `postgres://${role}@127.0.0.1:${port}/pgbouncer` });
    await c.connect();
    try {
      return (await c.query(`SHOW ${what.replace(/[^A-Z_]/g, '')}`)).rows;
    } finally {
      await c.end().catch(() => {});
    }
  };
  return { url, port, show };
}


/** A pool connected as a fresh LOGIN role (granted `grantedRole`, or nothing); `stepd.` names the test schema. */
export async function connectAs(
  t: TestSchema,
  grantedRole: string | null,
  prefix = 'wrk',
): Promise<{ role: string; pool: pg.Pool; q: <R = any>(text: string, values?: unknown[]) => Promise<R[]> }> {
  const { role, url } = await createLoginRole(t, grantedRole, `${prefix}_${randomBytes(5).toString('hex')}`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  return { role, pool, q: async (text, values) => (await pool.query(text.replaceAll('stepd.', `${t.schema}.`), values)).rows };
}

/** Lines `done <step_id> <key>` of a test worker's log, as [step_id, key]. */
export function doneLines(lines: string[]): [string, string][] {
  return lines.filter((l) => l.startsWith('done ')).map((l) => l.split(' ').slice(1, 3) as [string, string]);
}

/** One workflow per batch, each a forEach of `items` billing.charge steps joined by core.echo. */
const CHARGE_FANOUT = {
  start: 'each',
  steps: {
    each: { forEach: { items: '{{input.orders}}', step: 'charge' }, join: 'sum' },
    charge: { tool: 'billing.charge', args: { order: '{{item}}', amount: 1 } },
    sum: { tool: 'core.echo', args: { results: '{{results}}' }, done: true, output: '{{result.results}}' },
  },
};

/**
 * Runs `workflows` x `items` billing.charge steps through the given workers and checks that none
 * was lost and none done twice: every workflow completed with all its results, every step done
 * once, every idempotency key reported once.
 */
export async function runChargeBatch(t: TestSchema, workers: PythonWorker[], workflows: number, items: number, timeoutMs: number): Promise<void> {
  for (let w = 0; w < workflows; w++) {
    await insertWorkflow(t, CHARGE_FANOUT, { orders: Array.from({ length: items }, (_, i) => `${w}-${i}`) });
  }
  await waitFor(async () => {
    const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status IN ('new', 'running')`);
    return r!.n === 0;
  }, 'every workflow to end', timeoutMs);
  const ended = await t.q<{ status: string; output: unknown; error: unknown }>(`SELECT status, output, error FROM stepd.workflows ORDER BY id`);
  const bad = ended.filter((w) => w.status !== 'completed' || !Array.isArray(w.output) || w.output.length !== items);
  expect(bad.slice(0, 3)).toEqual([]);
  const reports = workers.flatMap((w) => doneLines(w.lines()));
  expect(reports).toHaveLength(workflows * items);
  expect(new Set(reports.map((r) => r[1])).size).toBe(workflows * items);
  const [rows] = await t.q<{ done: number; other: number }>(
    `SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status <> 'done')::int AS other
       FROM stepd.workflow_steps WHERE name = 'charge'`,
  );
  expect(rows).toEqual({ done: workflows * items, other: 0 });
}
