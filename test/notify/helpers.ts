/**
 * Notifications end to end for tests: a real local webhook receiver that verifies each
 * delivery's signature (and can fail the first deliveries, to see pg-boss retry), and a stack of
 * the executor, the notifier and the daemon's HTTP app (with its approval links) on a real port.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Operations } from '../../src/api/operations.js';
import { createTokenLookup } from '../../src/api/tokens.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createHttpApp } from '../../src/http/app.js';
import { AuthThrottle } from '../../src/http/authThrottle.js';
import { startHttpServer } from '../../src/http/server.js';
import { Sessions } from '../../src/http/sessions.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { Notifier, type NotifierOptions } from '../../src/notify/notifier.js';
import type { NotifyHook } from '../../src/notify/notifyConfig.js';
import { SIGNATURE_HEADER, verifySignature } from '../../src/notify/signature.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import { onCleanup, startExecutor, type TestSchema } from '../helpers/db.js';

export interface Delivery {
  body: Record<string, any>;
  raw: string;
  headers: Record<string, string | string[] | undefined>;
  signatureValid: boolean;
  /** What the receiver answered. */
  status: number;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** Answer 500 to this many more deliveries. */
  failNext(n: number): void;
}

export async function startReceiver(secret: string): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  let failing = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const status = failing > 0 ? 500 : 204;
      if (failing > 0) failing--;
      deliveries.push({ body: JSON.parse(raw), raw, headers: req.headers, signatureValid: verifySignature(secret, raw, req.headers[SIGNATURE_HEADER] as string | undefined), status });
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries, failNext: (n) => void (failing = n) };
}

export interface NotifyStack {
  notifier: Notifier;
  /** The daemon's HTTP base URL (the approval links point there). */
  httpUrl: string;
  log: Logger;
  /** Every log line, as written. */
  lines: string[];
}

/** The receivers listen on loopback: allowed as an operator's `http.allow` would (webhooks obey the egress rules). */
export const LOOPBACK_ALLOWED = new EgressPolicy({ policy: { allow: ['http://127.0.0.1:*'] } });

export async function startNotifyStack(t: TestSchema, hooks: NotifyHook[], opts: { linkTtlMs?: number; egress?: EgressPolicy; metrics?: NotifierOptions['metrics'] } = {}): Promise<NotifyStack> {
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(line) } as never });
  await startExecutor(t);
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 3 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  const operations = new Operations({ pool, db, schema: t.schema });
  const app = createHttpApp({
    auth: { tokens: createTokenLookup({ tokens: { [randomBytes(16).toString('hex')]: 'nobody' } }), localUser: 'nobody', sessions: new Sessions(), throttle: new AuthThrottle() },
    log,
    dashboard: { operations, db },
    links: { operations, pool, log },
  });
  const server = await startHttpServer(app, { host: '127.0.0.1', port: 0 });
  onCleanup(() => server.close());
  const notifier = new Notifier({
    databaseUrl: t.url,
    schema: t.schema,
    log,
    hooks,
    linkBaseUrl: server.url,
    pollMs: 50,
    workPollSeconds: 0.5,
    retryDelaySeconds: 1,
    egress: opts.egress ?? LOOPBACK_ALLOWED,
    ...(opts.linkTtlMs !== undefined ? { linkTtlMs: opts.linkTtlMs } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
  });
  await notifier.start();
  onCleanup(() => notifier.stop());
  return { notifier, httpUrl: server.url, log, lines };
}
