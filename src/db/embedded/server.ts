/** The server process: finding the one already running, starting it, and talking to it. */
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { ConfigError } from '../../errors.js';
import type { Context } from './context.js';
import { EmbeddedPostgresError } from './embeddedPostgresError.js';
import { errCode, fileSize, logTail, range, readFrom, realpathOr } from './helpers.js';
import { isPostmasterFor, portIsFree, processState, readPidFile } from './processes.js';
import { explainFailure, run } from './programs.js';
import { type State, stateFile } from './state.js';

export const DEFAULT_EMBEDDED_PORT = 54329;
const PORT_SCAN = 50;
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

/**
 * The server already running for this cluster, waiting while it is still starting (crash
 * recovery). A postmaster.pid whose process is gone, a zombie, or some unrelated process that got
 * the same pid is removed: PostgreSQL would otherwise refuse to start. PostgreSQL's own
 * shared-memory check still guards against backends that outlived their postmaster.
 */
export async function runningServer(ctx: Context, state: State): Promise<{ pid: number; port: number } | undefined> {
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

export async function startServer(ctx: Context, state: State, requestedPort: number | undefined): Promise<{ pid: number; port: number }> {
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

export async function createDatabase(ctx: Context, adminUrl: string): Promise<void> {
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

export function connectionUrl(state: State, port: number, database: string): string {
  return `postgres://${encodeURIComponent(state.user)}:${encodeURIComponent(state.password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
}

/** Whether the server at `url` answers and serves this cluster (not some other server on that port). */
export async function probe(url: string, pgdata: string): Promise<{ ok: true } | { ok: false; error: unknown }> {
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

async function prepareLogFile(ctx: Context): Promise<string> {
  const file = path.join(ctx.dataDir, 'postgres.log');
  if ((await fileSize(file)) > LOG_ROTATE_BYTES) await fs.rename(file, `${file}.1`);
  await (await fs.open(file, 'a', 0o600)).close();
  if (ctx.runAs) await fs.chown(file, ctx.runAs.uid, ctx.runAs.gid);
  return file;
}
