/**
 * Signed browser sessions and CSRF tokens. A session cookie holds a random session id, the user
 * and an expiry, signed with HMAC-SHA256 under a secret of this server (random per process unless
 * given: a restart signs everyone out), never the API token itself.
 *
 * Sign-out revokes the session: its id stays on a revocation list until the session would have
 * expired, so the old cookie, replayed, is refused. The list holds at most `maxRevoked` ids; when
 * it is full, the session expiring first is dropped from it and every session expiring no later
 * is refused from then on (sessions all live `ttlMs`, so those are the oldest): a full list signs
 * some users out early, it never lets a revoked cookie back in.
 *
 * A signed-in page's CSRF token is an HMAC of its session id, so each session has its own and a
 * token of another session is refused; a page of another origin cannot know either. Without
 * API tokens there are no sessions (loopback requests act as the daemon's user): that user's
 * token is an HMAC of the user under the process's secret.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SESSION_COOKIE = 'stepd_session';
const DEFAULT_TTL_MS = 12 * 60 * 60 * 1000;
const DEFAULT_MAX_REVOKED = 10_000;

export interface Session {
  /** Random, unique per sign-in. */
  id: string;
  user: string;
  expiresAt: number;
}

export class Sessions {
  private readonly secret: Buffer;
  readonly ttlMs: number;
  readonly maxRevoked: number;
  /** Revoked session ids → when they would have expired (ms). */
  readonly #revoked = new Map<string, number>();
  /** Sessions expiring at or before this (ms) are refused: the list overflowed past them. */
  #revokedUpTo = 0;

  constructor(opts: { secret?: Buffer; ttlMs?: number; maxRevoked?: number } = {}) {
    this.secret = opts.secret ?? randomBytes(32);
    this.ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS;
    this.maxRevoked = opts.maxRevoked ?? DEFAULT_MAX_REVOKED;
  }

  /** The cookie value of a new session for `user`. */
  issue(user: string, now: Date = new Date()): string {
    const id = randomBytes(16).toString('base64url');
    const body = `${id}.${Buffer.from(user, 'utf8').toString('base64url')}.${now.getTime() + this.ttlMs}`;
    return `${body}.${this.sign(`session:${body}`)}`;
  }

  /** The session of a valid, unexpired, unrevoked session cookie; `undefined` for anything else. */
  verify(cookie: string | undefined, now: Date = new Date()): Session | undefined {
    const session = this.#read(cookie, now);
    if (!session || session.expiresAt <= this.#revokedUpTo || this.#revoked.has(session.id)) return undefined;
    return session;
  }

  /** Ends the session of `cookie` (sign-out): the cookie is refused from now on. Anything else is ignored. */
  revoke(cookie: string | undefined, now: Date = new Date()): void {
    const session = this.verify(cookie, now);
    if (!session) return;
    this.#forgetExpired(now.getTime());
    while (this.#revoked.size >= this.maxRevoked) this.#dropFirstExpiring();
    this.#revoked.set(session.id, session.expiresAt);
  }

  /** How many revoked sessions are remembered (at most maxRevoked). */
  get revokedCount(): number {
    return this.#revoked.size;
  }

  /** The CSRF token of a signed-in session's pages. */
  sessionCsrfToken(sessionId: string): string {
    return this.sign(`csrf-session:${sessionId}`);
  }

  /** The CSRF token of a loopback user's pages (no API tokens configured, so no sessions). */
  csrfToken(user: string): string {
    return this.sign(`csrf:${user}`);
  }

  #read(cookie: string | undefined, now: Date): Session | undefined {
    if (!cookie) return undefined;
    const parts = cookie.split('.');
    if (parts.length !== 4) return undefined;
    const [id, user64, expires, mac] = parts as [string, string, string, string];
    const body = `${id}.${user64}.${expires}`;
    if (!equalText(mac, this.sign(`session:${body}`))) return undefined;
    if (!id || !/^\d+$/.test(expires) || Number(expires) <= now.getTime()) return undefined;
    const user = Buffer.from(user64, 'base64url').toString('utf8');
    return user ? { id, user, expiresAt: Number(expires) } : undefined;
  }

  #forgetExpired(nowMs: number): void {
    for (const [id, expiresAt] of this.#revoked) if (expiresAt <= nowMs) this.#revoked.delete(id);
  }

  #dropFirstExpiring(): void {
    let first: [string, number] | undefined;
    for (const entry of this.#revoked) if (!first || entry[1] < first[1]) first = entry;
    if (!first) return;
    this.#revoked.delete(first[0]);
    this.#revokedUpTo = Math.max(this.#revokedUpTo, first[1]);
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
