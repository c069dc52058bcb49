/**
 * What every dashboard answer shares: the page context of the request (user, CSRF token, a fresh
 * CSP nonce) and an HTML response with the security headers. A request with
 * `X-Stepd-Fragment: 1` (the page's live refresh) gets only the live region.
 */
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { HttpEnv } from '../auth.js';
import { csrfTokenOf } from '../csrf.js';
import type { Html } from '../html.js';
import type { Sessions } from '../sessions.js';
import { contentSecurityPolicy, type PageContext } from './layout.js';

export function pageContext(c: Context<HttpEnv>, sessions: Sessions): PageContext {
  const user = c.get('user');
  return { user, signedIn: c.get('via') === 'session', csrf: csrfTokenOf(c, sessions) ?? '', nonce: randomBytes(16).toString('base64') };
}

export function isFragmentRequest(c: Context<HttpEnv>): boolean {
  return c.req.header('x-stepd-fragment') === '1';
}

export function sendHtml(c: Context<HttpEnv>, ctx: { nonce: string }, body: Html, status: 200 | 400 | 403 | 404 | 409 | 500 | 501 | 503 = 200): Response {
  c.header('Content-Security-Policy', contentSecurityPolicy(ctx.nonce));
  c.header('Cache-Control', 'no-store');
  c.header('Vary', 'X-Stepd-Fragment, Cookie');
  return c.html(body.value, status);
}
