/**
 * Who is asking. With API tokens configured (`"api": {"tokens": {"<token>": "alice"}}`) every
 * request needs one: an `Authorization: Bearer <token>` header, or the session cookie the
 * sign-in form sets. Without tokens the server answers loopback clients only, addressed by a
 * loopback host name (a DNS-rebinding page cannot reach it), and acts as the daemon's user.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import type { HttpBindings } from '@hono/node-server';
import { bearerToken, type TokenLookup } from '../api/tokens.js';
import type { AuthThrottle } from './authThrottle.js';
import { SESSION_COOKIE, type Sessions } from './sessions.js';
import { TrustedProxies } from './trustedProxies.js';

/** How the user was recognised; only `session` and `local` requests can be forged by a browser (CSRF). */
export type AuthVia = 'bearer' | 'session' | 'local';

export interface HttpEnv {
  Bindings: Partial<HttpBindings>;
  /** `session`: the signed-in session's id (via `session` only); `https`: the browser used TLS (trustedProxies.ts). */
  Variables: { user: string; via: AuthVia; session?: string; https: boolean };
}

export interface AuthPolicy {
  /** The configured tokens; none enabled: loopback clients only. */
  tokens: TokenLookup;
  /** The user of loopback requests when there are no tokens. */
  localUser: string;
  sessions: Sessions;
  /** Wrong tokens per client address: past its allowance an address gets 429 (authThrottle.ts). */
  throttle: AuthThrottle;
  /** `api.trustProxy`: whose `X-Forwarded-Proto` is believed (none: only a TLS connection is https). */
  proxies?: TrustedProxies;
}

/** Paths that answer without a user (the sign-in form itself). */
const PUBLIC_PATHS = new Set(['/sign-in']);

export function authenticate(policy: AuthPolicy): MiddlewareHandler<HttpEnv> {
  const proxies = policy.proxies ?? new TrustedProxies();
  return async (c, next) => {
    const socket = c.env?.incoming?.socket as { encrypted?: boolean } | undefined;
    c.set('https', proxies.isHttps({ encrypted: socket?.encrypted === true, remoteAddress: remoteAddress(c), forwardedProto: c.req.header('x-forwarded-proto') }));
    if (!policy.tokens.enabled) {
      if (!isLoopbackAddress(remoteAddress(c))) {
        return c.text('stepd serves only loopback clients when no api.tokens are configured\n', 403);
      }
      // The URL's host is the request's Host header (the listening address when it has none).
      if (!isLoopbackHost(new URL(c.req.url).host)) {
        return c.text('refused: the Host header must name a loopback address (127.0.0.1, ::1 or localhost) when no api.tokens are configured\n', 403);
      }
      c.set('user', policy.localUser);
      c.set('via', 'local');
      return next();
    }
    const bearer = bearerToken(c.req.header('authorization'));
    if (bearer !== undefined) {
      const address = remoteAddress(c) ?? 'unknown';
      const waitMs = policy.throttle.retryAfterMs(address);
      if (waitMs > 0) return tooManyFailures(c, waitMs);
      const user = policy.tokens.userFor(bearer);
      if (!user) {
        policy.throttle.failed(address);
        return unauthorized(c, 'invalid token');
      }
      c.set('user', user);
      c.set('via', 'bearer');
      return next();
    }
    const session = policy.sessions.verify(getCookie(c, SESSION_COOKIE));
    if (session) {
      c.set('user', session.user);
      c.set('via', 'session');
      c.set('session', session.id);
      return next();
    }
    if (PUBLIC_PATHS.has(c.req.path)) return next();
    if (c.req.method === 'GET' && (c.req.header('accept') ?? '').includes('text/html')) {
      return c.redirect(`/sign-in?next=${encodeURIComponent(c.req.path + new URL(c.req.url).search)}`, 303);
    }
    return unauthorized(c, 'a token is required (Authorization: Bearer <token>)');
  };
}

function unauthorized(c: Context<HttpEnv>, message: string): Response {
  c.header('WWW-Authenticate', 'Bearer realm="stepd"');
  return c.text(`${message}\n`, 401);
}

/** Sets Retry-After for a wait of `waitMs` (whole seconds, at least one) and returns the seconds. */
export function retryAfter(c: Context<HttpEnv>, waitMs: number): number {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  c.header('Retry-After', String(seconds));
  return seconds;
}

/** 429 with Retry-After: this address sent too many wrong tokens lately. */
function tooManyFailures(c: Context<HttpEnv>, waitMs: number): Response {
  return c.text(`too many wrong tokens from this address; try again in ${retryAfter(c, waitMs)} s\n`, 429);
}

export function remoteAddress(c: Context<HttpEnv>): string | undefined {
  return c.env?.incoming?.socket?.remoteAddress;
}

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4 === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Whether a Host header names this machine by a loopback name or address. */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const bareIpv6 = !host.startsWith('[') && host.indexOf(':') !== host.lastIndexOf(':');
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : bareIpv6 ? host : host.replace(/:\d+$/, '');
  return name === 'localhost' || name.endsWith('.localhost') || isLoopbackAddress(name);
}
