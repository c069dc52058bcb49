/**
 * What every dashboard answer shares: the page context of the request (user, CSRF token, a fresh
 * CSP nonce) and an HTML response with the security headers. A request with
 * `X-Stepd-Fragment: 1` (the page's live refresh) gets only the live region. And the answer to a
 * refused POST whose own page cannot be shown again (sendRefused).
 */
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import type { HttpEnv } from '../auth.js';
import { csrfTokenOf } from '../csrf.js';
import { html, type Html } from '../html.js';
import type { Sessions } from '../sessions.js';
import { contentSecurityPolicy, page, type PageContext } from './layout.js';

type Status = 200 | 400 | 403 | 404 | 409 | 500 | 501 | 503;

export function pageContext(c: Context<HttpEnv>, sessions: Sessions): PageContext {
  const user = c.get('user');
  return { user, signedIn: c.get('via') === 'session', csrf: csrfTokenOf(c, sessions) ?? '', nonce: randomBytes(16).toString('base64') };
}

export function isFragmentRequest(c: Context<HttpEnv>): boolean {
  return c.req.header('x-stepd-fragment') === '1';
}

export function sendHtml(c: Context<HttpEnv>, ctx: { nonce: string }, body: Html, status: Status = 200): Response {
  c.header('Content-Security-Policy', contentSecurityPolicy(ctx.nonce));
  c.header('Cache-Control', 'no-store');
  c.header('Vary', 'X-Stepd-Fragment, Cookie');
  return c.html(body.value, status);
}

/**
 * A refused POST: its message and a link back, the back page's address in the address bar (the
 * page's pageUrl), so a reload GETs that page and never posts the form again.
 */
export function sendRefused(c: Context<HttpEnv>, ctx: PageContext, o: { message: string; status: Status; back: { href: string; label: string } }): Response {
  const body = html`<p><a href="${o.back.href}">← ${o.back.label}</a></p><p class="flash" role="alert" id="problem">${o.message}</p>`;
  return sendHtml(c, ctx, page(ctx, { title: 'refused', pageUrl: o.back.href, body }), o.status);
}
