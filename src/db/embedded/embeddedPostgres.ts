/** The public API of the embedded PostgreSQL: start, ensure, find and stop the server for a folder. */
import path from 'node:path';
import type { Logger } from 'pino';
import { ConfigError } from '../../errors.js';
import { initCluster, makeDataDir } from './cluster.js';
import type { Context } from './context.js';
import { EmbeddedPostgresError } from './embeddedPostgresError.js';
import { errCode, exists, logTail, waitFor } from './helpers.js';
import { letUserTraverse, serverUser } from './osUser.js';
import { isPostmasterFor, processState, readPidFile } from './processes.js';
import { findBinaries, serverVersion } from './programs.js';
import { connectionUrl, createDatabase, probe, runningServer, startServer } from './server.js';
import { claimServer, clearOwnership, joinServer, leaveServer, newMember, type Member } from './ownership.js';
import { acquireStartLock } from './startLock.js';
import { clusterDir, readState, stateFile, writeState } from './state.js';

const DEFAULT_DATABASE = 'stepd';
const DEFAULT_START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;

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
  /**
   * True when another live process started the server and still owns it: this one only uses it.
   * (Ownership can pass to this handle later, when that process leaves first.)
   */
  attached: boolean;
  /**
   * Leaves the server: a fast shutdown, waiting until it has exited, when this handle owns it
   * (it started it, or inherited it from an owner that died) and no other live process uses it;
   * otherwise the server keeps running for the others. Safe to call more than once.
   */
  stop(): Promise<void>;
}

export interface RunningEmbeddedPostgres {
  url: string;
  port: number;
  pid: number;
}

/**
 * Makes sure the server for `dataDir` runs (initialising the cluster on first use, reusing a server
 * that is already running) and joins it: owner when this call started it or its owner is gone,
 * attached when a live process owns it (see ownership.ts). `stop()` never stops a server another
 * live process uses. This is what `stepd start` calls.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const me = await newMember();
  const server = await bringUp(opts, me);
  return withStop(server, opts, me);
}

/**
 * Returns the server already running for `dataDir` without joining it (its `stop()` does
 * nothing), or starts and joins it like startEmbeddedPostgres. A CLI command never stops the
 * daemon's database.
 */
export async function ensureEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(opts.dataDir);
  const running = await findEmbeddedPostgres(dataDir);
  if (running) {
    const database = opts.database ?? DEFAULT_DATABASE;
    if (new URL(running.url).pathname === `/${encodeURIComponent(database)}`) {
      opts.log.debug({ dataDir, pid: running.pid }, 'embedded PostgreSQL is running; using it');
      return { ...running, dataDir, reused: true, attached: true, stop: () => Promise.resolve() };
    }
  }
  return startEmbeddedPostgres(opts);
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
 * Stops the server running for `dataDir` whoever uses it (fast shutdown: sessions are ended, then
 * a checkpoint) and waits until its postmaster has exited. Returns false when none was running.
 */
export async function stopEmbeddedPostgres(opts: { dataDir: string; log: Logger; timeoutMs?: number }): Promise<boolean> {
  const dataDir = path.resolve(opts.dataDir);
  const pidFile = await readPidFile(clusterDir(dataDir));
  const stopped = pidFile ? await stopPostmaster(dataDir, pidFile.pid, opts) : false;
  if (stopped) await clearOwnership(dataDir);
  return stopped;
}

/** Stops the postmaster `pid` if it still is the one of `dataDir` (its command line names the cluster); false when it is not running. */
async function stopPostmaster(dataDir: string, pid: number, opts: { log: Logger; timeoutMs?: number }): Promise<boolean> {
  const pgdata = clusterDir(dataDir);
  if ((await processState(pid)) === 'gone' || !(await isPostmasterFor(pid, pgdata))) {
    opts.log.info({ dataDir, pid }, 'embedded PostgreSQL had already stopped');
    return false;
  }
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

async function bringUp(opts: EmbeddedPostgresOptions, me: Member): Promise<Omit<EmbeddedPostgres, 'stop'>> {
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
    const joined = reused ? await joinServer(dataDir, pid, me) : await claimServer(dataDir, pid, me);
    const attached = joined.role === 'attached';
    const url = connectionUrl(state, port, ctx.database);
    await createDatabase(ctx, connectionUrl(state, port, 'postgres'));
    if (!attached) await writeState(dataDir, { ...state, database: ctx.database, url, port, pid, pgVersion, startedAt: new Date().toISOString() });
    if (attached) log.info({ url, dataDir, pid, pgVersion, ownerPid: joined.owner.pid }, 'embedded PostgreSQL already running for another process; using it without owning it');
    else log.info({ url, dataDir, pid, pgVersion, reused }, reused ? 'embedded PostgreSQL already running; reusing it' : 'embedded PostgreSQL started');
    return { url, port, pid, dataDir, reused, attached };
  } finally {
    await release();
  }
}

/** stop(): leave the server under the start lock, so no other process joins it while it is being stopped. */
function withStop(server: Omit<EmbeddedPostgres, 'stop'>, opts: EmbeddedPostgresOptions, me: Member): EmbeddedPostgres {
  const { log } = opts;
  let stopping: Promise<void> | undefined;
  const leave = async (): Promise<void> => {
    const release = await acquireStartLock(server.dataDir, STOP_TIMEOUT_MS + 30_000);
    try {
      const left = await leaveServer(server.dataDir, server.pid, me);
      if (left.action === 'stop') {
        await stopPostmaster(server.dataDir, server.pid, { log });
      } else if (left.owner) {
        const how = left.handedOver ? 'handed to another process that uses it' : 'its owner still uses it';
        log.info({ dataDir: server.dataDir, pid: server.pid, ownerPid: left.owner.pid }, `embedded PostgreSQL left running: ${how}`);
      } else {
        log.info({ dataDir: server.dataDir, pid: server.pid }, 'embedded PostgreSQL left running: this process did not start the server now running');
      }
    } finally {
      await release();
    }
  };
  return {
    ...server,
    stop() {
      stopping ??= leave();
      return stopping;
    },
  };
}
