/**
 * Cross-site request forgery. A browser attaches the session cookie (or, without tokens, simply
 * reaches 127.0.0.1) on a request another site makes; a Bearer header it never adds by itself.
 * So every state-changing request that is not Bearer-authenticated must
 *   1. come from this origin: an `Origin` header, when present, equal to the server's own, and a
 *      `Sec-Fetch-Site`, when present, `same-origin` (or `none`: typed by the user), and
 *   2. for the dashboard's forms, carry the page's CSRF token (`csrf` field or `X-CSRF-Token`):
 *      the token of the request's own session (sessions.ts), so a token read from another
 *      session — another user's, or the same user's before a sign-out — is refused.
 * The server's own origin is `https://` when the browser came over TLS (directly, or through a
 * trusted proxy: trustedProxies.ts), else the request URL's.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { HttpEnv } from './auth.js';
import { equalText, type Sessions } from './sessions.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Refuses cross-origin state-changing requests (applied to every route, /mcp included). */
export function sameOriginWrites(): MiddlewareHandler<HttpEnv> {
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method) || c.get('via') === 'bearer') return next();
    const why = crossOriginReason(c);
    if (why) return c.text(`refused: ${why}\n`, 403);
    return next();
  };
}

function crossOriginReason(c: Context<HttpEnv>): string | undefined {
  const url = new URL(c.req.url);
  const own = c.get('https') ? `https://${url.host}` : url.origin;
  const origin = c.req.header('origin');
  if (origin !== undefined && origin !== own) return `a request from origin ${origin} may not change anything here`;
  const site = c.req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return `a ${site} request may not change anything here`;
  return undefined;
}

/** The CSRF token the pages of this request carry: its session's, else the loopback user's; undefined for neither. */
export function csrfTokenOf(c: Context<HttpEnv>, sessions: Sessions): string | undefined {
  const via = c.get('via');
  if (via === 'session') {
    const id = c.get('session');
    return id ? sessions.sessionCsrfToken(id) : undefined;
  }
  const user = c.get('user');
  return via === 'local' && user ? sessions.csrfToken(user) : undefined;
}

/** Requires the CSRF token of the request's session (or loopback user) on state-changing dashboard requests. */
export function requireCsrfToken(sessions: Sessions): MiddlewareHandler<HttpEnv> {
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method) || c.get('via') === 'bearer') return next();
    let token = c.req.header('x-csrf-token');
    if (token === undefined && isForm(c.req.header('content-type'))) {
      const body = await c.req.parseBody();
      token = typeof body.csrf === 'string' ? body.csrf : undefined;
    }
    const expected = csrfTokenOf(c, sessions);
    if (expected === undefined || token === undefined || !equalText(token, expected)) {
      return c.text('refused: missing or wrong CSRF token (reload the page and try again)\n', 403);
    }
    return next();
  };
}

function isForm(contentType: string | undefined): boolean {
  return /^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(contentType ?? '');
}
