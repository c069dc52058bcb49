/**
 * The daemon's HTTP app: authentication and CSRF checks in front of everything, then what the
 * caller mounts:
 *   /sign-in, /sign-out          the token sign-in form (with api.tokens)
 *   /, /workflows/…              the dashboard (pages and buttons)            `dashboard`
 *   /events                      Server-Sent Events from stepd_events         `events`
 *   /mcp                         MCP over Streamable HTTP, as the caller      `mcp`
 *   /metrics                     Prometheus text                              `metrics`
 *   /healthz                     `ok` (for probes; still behind authentication)
 * Each part is optional, so tests and other commands can build only what they need.
 */
import { Hono } from 'hono';
import { OperationError, httpStatusFor } from '../api/errors.js';
import type { Logger } from '../logger.js';
import { authenticate, type AuthPolicy, type HttpEnv } from './auth.js';
import { requireCsrfToken, sameOriginWrites } from './csrf.js';
import { mountActions } from './dashboard/actions.js';
import { mountDayTwoActions } from './dashboard/dayTwoActions.js';
import { mountPages } from './dashboard/pages.js';
import { mountSchedulesPage } from './dashboard/schedulesPage.js';
import type { DashboardDeps } from './dashboard/dashboardDeps.js';
import type { EventHub } from './eventHub.js';
import { mountEvents } from './eventsRoute.js';
import { mountSignIn } from './signIn.js';
import { mountApprovalLinks, type ApprovalLinkDeps } from './approvalLinks.js';

/** A web-standard handler that serves MCP for an authenticated user. */
export type McpHandler = (request: Request, user: string) => Promise<Response>;
export type MetricsHandler = (request: Request) => Promise<Response>;

export interface HttpAppOptions {
  auth: AuthPolicy;
  log: Logger;
  dashboard?: Omit<DashboardDeps, 'sessions'>;
  events?: EventHub;
  mcp?: McpHandler;
  metrics?: MetricsHandler;
  /** The approval links of notifications (/links/…): their token is the credential, so they come before authentication. */
  links?: ApprovalLinkDeps;
}

export function createHttpApp(opts: HttpAppOptions): Hono<HttpEnv> {
  const app = new Hono<HttpEnv>();
  app.use('*', async (c, next) => {
    await next();
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'same-origin');
    c.header('X-Frame-Options', 'DENY');
  });
  if (opts.links) mountApprovalLinks(app, opts.links);
  app.use('*', authenticate(opts.auth));
  app.use('*', sameOriginWrites());
  app.onError((err, c) => {
    // The database unreachable, or a bug: the operations layer says which; nothing internal leaks.
    if (err instanceof OperationError && err.code !== 'internal') {
      opts.log.warn({ err, method: c.req.method, path: c.req.path }, 'http request refused');
      return c.text(`${err.message}\n`, httpStatusFor(err.code) as 400);
    }
    opts.log.error({ err, method: c.req.method, path: c.req.path }, 'http request failed');
    return c.text('internal error (see the daemon log)\n', 500);
  });

  mountSignIn(app, opts.auth);
  app.get('/healthz', (c) => c.text('ok\n'));
  app.get('/favicon.ico', (c) => c.body(null, 204));
  if (opts.metrics) {
    const metrics = opts.metrics;
    app.get('/metrics', (c) => metrics(c.req.raw));
  }
  if (opts.mcp) {
    const mcp = opts.mcp;
    app.all('/mcp', (c) => mcp(c.req.raw, c.get('user')));
  }
  if (opts.events) mountEvents(app, opts.events);
  if (opts.dashboard) {
    const deps: DashboardDeps = { ...opts.dashboard, sessions: opts.auth.sessions };
    app.use('/workflows/*', requireCsrfToken(opts.auth.sessions));
    mountDayTwoActions(app, deps);
    mountPages(app, deps);
    mountSchedulesPage(app, deps);
    mountActions(app, deps);
  }
  return app;
}
