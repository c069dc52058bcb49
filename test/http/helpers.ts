/**
 * The HTTP app over a test schema, driven in-process with `app.request` (no socket): each request
 * names the client's address through the node-server bindings, as a real connection would.
 */
import { Operations } from '../../src/api/operations.js';
import { createTokenLookup } from '../../src/api/tokens.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createHttpApp, type HttpAppOptions } from '../../src/http/app.js';
import { Sessions } from '../../src/http/sessions.js';
import { silentLogger } from '../../src/logger.js';
import { onCleanup, type TestSchema } from '../helpers/db.js';
import { AuthThrottle } from '../../src/http/authThrottle.js';

export const ALICE_TOKEN = 'alice-token-0123456789abcdef';
export const BOB_TOKEN = 'bob-token-0123456789abcdef';

export interface TestApp {
  app: ReturnType<typeof createHttpApp>;
  sessions: Sessions;
  /** A request from `from` (default 127.0.0.1) to `url` (a path, or a whole URL naming the host). */
  request(url: string, init?: RequestInit, from?: string): Promise<Response>;
}

export function buildTestApp(
  t: TestSchema,
  opts: { tokens?: Record<string, string>; localUser?: string; throttle?: AuthThrottle } & Pick<HttpAppOptions, 'mcp' | 'metrics'> = {},
): TestApp {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  const operations = new Operations({ pool, db, schema: t.schema });
  const sessions = new Sessions();
  const app = createHttpApp({
    auth: { tokens: createTokenLookup(opts.tokens ? { tokens: opts.tokens } : undefined), localUser: opts.localUser ?? 'local-user', sessions, throttle: opts.throttle ?? new AuthThrottle() },
    log: silentLogger(),
    dashboard: { operations, db },
    ...(opts.mcp ? { mcp: opts.mcp } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
  });
  return {
    app,
    sessions,
    request: async (url, init = {}, from = '127.0.0.1') => app.request(url, init, { incoming: { socket: { remoteAddress: from } } } as never),
  };
}

/** A form POST as the dashboard's own page sends it (same origin). */
export function formPost(fields: Record<string, string>, headers: Record<string, string> = {}): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://localhost', 'sec-fetch-site': 'same-origin', ...headers },
    body: new URLSearchParams(fields).toString(),
  };
}

/** The CSRF token a dashboard page carries for this cookie's session (from its sign-out form). */
export async function pageCsrf(request: TestApp['request'], cookie: string): Promise<string> {
  const page = await (await request('/', { headers: { accept: 'text/html', cookie } })).text();
  const token = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  if (!token) throw new Error('the page carries no CSRF token');
  return token;
}

/** The `name=value` of a Set-Cookie header, for the next request's Cookie header. */
export function cookieOf(res: Response): string {
  const set = res.headers.get('set-cookie') ?? '';
  return set.split(';')[0] ?? '';
}

export const gatedFlow = {
  start: 'review',
  steps: {
    review: { description: 'Ship it?', approval: true, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: true } },
  },
};
