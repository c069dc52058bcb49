/**
 * Signed browser sessions and CSRF tokens. A session cookie holds the user and an expiry signed
 * with HMAC-SHA256 under a secret of this server (random per process unless given: a restart
 * signs everyone out), never the API token itself. The CSRF token of a page is an HMAC of the
 * user under the same secret, so a page of another origin cannot know it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SESSION_COOKIE = 'stepd_session';
const DEFAULT_TTL_MS = 12 * 60 * 60 * 1000;

export class Sessions {
  private readonly secret: Buffer;
  readonly ttlMs: number;

  constructor(opts: { secret?: Buffer; ttlMs?: number } = {}) {
    this.secret = opts.secret ?? randomBytes(32);
    this.ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS;
  }

  /** The cookie value of a new session for `user`. */
  issue(user: string, now: Date = new Date()): string {
    const body = `${Buffer.from(user, 'utf8').toString('base64url')}.${now.getTime() + this.ttlMs}`;
    return `${body}.${this.sign(`session:${body}`)}`;
  }

  /** The user of a valid, unexpired session cookie; `undefined` for anything else. */
  verify(cookie: string | undefined, now: Date = new Date()): string | undefined {
    if (!cookie) return undefined;
    const parts = cookie.split('.');
    if (parts.length !== 3) return undefined;
    const [user64, expires, mac] = parts as [string, string, string];
    const body = `${user64}.${expires}`;
    if (!equalText(mac, this.sign(`session:${body}`))) return undefined;
    if (!/^\d+$/.test(expires) || Number(expires) <= now.getTime()) return undefined;
    const user = Buffer.from(user64, 'base64url').toString('utf8');
    return user || undefined;
  }

  /** The CSRF token the pages of `user` carry in their forms. */
  csrfToken(user: string): string {
    return this.sign(`csrf:${user}`);
  }

  checkCsrf(user: string, token: string | undefined): boolean {
    return token !== undefined && equalText(token, this.csrfToken(user));
  }

  private sign(text: string): string {
    return createHmac('sha256', this.secret).update(text).digest('base64url');
  }
}

/** Constant-time comparison of two strings (false when their lengths differ). */
export function equalText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}
