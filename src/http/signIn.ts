/**
 * The sign-in form (only when API tokens are configured): the user pastes their token once and
 * gets a session cookie (HttpOnly, SameSite=Strict, signed, `Secure` when the browser came over
 * TLS, directly or through a trusted proxy; the token itself is not stored in the browser).
 * `POST /sign-out` revokes the session (sessions.ts): the old cookie, replayed, is refused.
 */
import { randomBytes } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { remoteAddress, retryAfter, type AuthPolicy, type HttpEnv } from './auth.js';
import { bareLayout, contentSecurityPolicy } from './dashboard/layout.js';
import { html } from './html.js';
import { SESSION_COOKIE } from './sessions.js';

export function mountSignIn(app: Hono<HttpEnv>, auth: AuthPolicy): void {
  app.get('/sign-in', (c) => {
    if (!auth.tokens.enabled) return c.redirect('/', 303);
    return form(c, localPath(c.req.query('next')));
  });

  app.post('/sign-in', async (c) => {
    if (!auth.tokens.enabled) return c.redirect('/', 303);
    const body = await c.req.parseBody();
    const next = localPath(typeof body.next === 'string' ? body.next : undefined);
    const token = typeof body.token === 'string' ? body.token.trim() : '';
    const address = remoteAddress(c) ?? 'unknown';
    const waitMs = auth.throttle.retryAfterMs(address);
    if (waitMs > 0) return form(c, next, `Too many wrong tokens from this address; try again in ${retryAfter(c, waitMs)} s.`, 429);
    const user = token ? auth.tokens.userFor(token) : undefined;
    if (!user) {
      auth.throttle.failed(address);
      return form(c, next, 'That token is not valid.', 401);
    }
    setCookie(c, SESSION_COOKIE, auth.sessions.issue(user), { ...cookieOptions(c), maxAge: Math.floor(auth.sessions.ttlMs / 1000) });
    return c.redirect(next, 303);
  });

  app.post('/sign-out', (c) => {
    auth.sessions.revoke(getCookie(c, SESSION_COOKIE));
    deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
    return c.redirect(auth.tokens.enabled ? '/sign-in' : '/', 303);
  });
}

/** The session cookie's attributes: `Secure` exactly when the browser's request was https. */
function cookieOptions(c: Context<HttpEnv>): { httpOnly: true; sameSite: 'Strict'; path: '/'; secure: boolean } {
  return { httpOnly: true, sameSite: 'Strict', path: '/', secure: c.get('https') };
}

function form(c: Context<HttpEnv>, next: string, problem?: string, status: 200 | 401 | 429 = 200): Response {
  const nonce = randomBytes(16).toString('base64');
  c.header('Content-Security-Policy', contentSecurityPolicy(nonce));
  c.header('Cache-Control', 'no-store');
  const body = html`<h2>Sign in</h2>
${problem ? html`<p class="flash" role="alert">${problem}</p>` : ''}
<form method="post" action="/sign-in" class="filters">
  <input type="hidden" name="next" value="${next}">
  <label>API token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
  <button>sign in</button>
</form>
<p class="muted">A token from the daemon's configuration (<code>api.tokens</code>); it signs you in as the user it maps to.</p>`;
  return c.html(bareLayout(nonce, 'sign in', body).value, status);
}

/**
 * Only a path on this server, else `/`: it starts with one `/`, and holds no backslash, control
 * character or space (browsers drop tabs and newlines inside a URL and read `\` as `/`, so
 * `/<TAB>/evil.example` would be `//evil.example`, another site).
 */
function localPath(next: string | undefined): string {
  return next && /^\/(?!\/)/.test(next) && !/[\\\x00-\x20\x7f]/.test(next) ? next : '/';
}
