/**
 * The HTTP side of `stepd start --http PORT`: a client pool of its own (the dashboard and /mcp
 * write through the SQL contract like any other service), the operations layer over it, one
 * LISTEN for the live pages, the app, and the server. `close()` stops them in reverse order.
 */
import { readCapacityGauges } from '../db/queries/capacity.js';
import { createTokenLookup } from '../api/tokens.js';
import { Operations } from '../api/operations.js';
import type { OperationsDeps } from '../api/operationsDeps.js';
import type { ApiConfig, CapsConfig } from '../configFile.js';
import { createKysely, createPool } from '../db/connect.js';
import { resolveCaps } from '../flow/caps.js';
import type { Logger } from '../logger.js';
import { createMcpHttpHandler } from '../mcpServer/createMcpHttpHandler.js';
import { createHttpApp, type MetricsHandler } from '../http/app.js';
import { isLoopbackHost } from '../http/auth.js';
import { EventHub } from '../http/eventHub.js';
import { startHttpServer, type RunningHttpServer } from '../http/server.js';
import { AuthThrottle } from '../http/authThrottle.js';
import { Sessions } from '../http/sessions.js';
import { TrustedProxies } from '../http/trustedProxies.js';

export interface DaemonHttpOptions {
  databaseUrl: string;
  schema: string;
  host?: string;
  port: number;
  /** The config's `api` section: bearer tokens → users. */
  api?: ApiConfig;
  /** Who a loopback request acts as when no tokens are configured. */
  localUser: string;
  log: Logger;
  /** Permissions, the operator's caps and the tool list, as the executor has them. */
  permissions?: OperationsDeps['permissions'];
  caps?: CapsConfig;
  listTools?: OperationsDeps['listTools'];
  /** The daemon's tools, so /mcp refuses unknown tools before insert (as stepd validate). */
  toolLookup?: OperationsDeps['toolLookup'];
  metrics?: MetricsHandler;
}

/** Ready gated steps the dashboard looks at, at most (capacityPanel.ts). */
const CAPACITY_GAUGE_CAP = 10_000;

export async function startDaemonHttp(opts: DaemonHttpOptions): Promise<RunningHttpServer> {
  const log = opts.log.child({ component: 'http' });
  const pool = createPool({ url: opts.databaseUrl, schema: opts.schema, role: 'client', max: 5, applicationName: 'stepd-http', onConnectionError: (err) => log.warn({ err }, 'http database connection lost') });
  const db = createKysely(pool);
  const operations = new Operations({
    pool,
    db,
    schema: opts.schema,
    caps: resolveCaps(opts.caps),
    // The pool's role is trusted (the database cannot tell users apart): who may cancel or retry what is decided here.
    admins: opts.api?.admins ?? [],
    // ...and so is the role every signal sent here would carry: only admins send them (operations.ts).
    sharedRole: true,
    ...(opts.permissions ? { permissions: opts.permissions } : {}),
    ...(opts.listTools ? { listTools: opts.listTools } : {}),
    ...(opts.toolLookup ? { toolLookup: opts.toolLookup } : {}),
  });
  const events = new EventHub({ url: opts.databaseUrl, schema: opts.schema, log });
  const tokens = createTokenLookup(opts.api);
  let server: RunningHttpServer | undefined;
  try {
    await events.start();
    const app = createHttpApp({
      auth: { tokens, localUser: opts.localUser, sessions: new Sessions(), throttle: new AuthThrottle(), proxies: new TrustedProxies(opts.api?.trustProxy) },
      log,
      dashboard: { operations, db, capacity: () => readCapacityGauges(pool, CAPACITY_GAUGE_CAP) },
      events,
      mcp: createMcpHttpHandler({ operations, log }),
      links: { operations, pool, log },
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
    });
    server = await startHttpServer(app, { ...(opts.host ? { host: opts.host } : {}), port: opts.port });
  } catch (err) {
    await events.close().catch(() => {});
    await db.destroy().catch(() => {});
    throw err;
  }
  const running = server;
  log.info({ url: running.url, auth: tokens.enabled ? 'tokens' : `loopback only, as ${opts.localUser}` }, 'http server listening');
  if (!tokens.enabled && !isLoopbackHost(opts.host ?? '127.0.0.1')) {
    log.warn({ host: opts.host }, 'no api.tokens configured: the http server answers only loopback clients whatever address it listens on');
  }
  return {
    url: running.url,
    port: running.port,
    close: async () => {
      await running.close();
      await events.close();
      await db.destroy();
    },
  };
}
