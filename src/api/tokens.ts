/**
 * Bearer tokens of the HTTP API (config `"api": {"tokens": {"${OPS_TOKEN}": "alice"}}`) → the
 * user a request acts as. Tokens are secrets: compared in constant time, never logged, never
 * part of an error message.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ApiConfig } from '../configFile.js';

export interface TokenLookup {
  /** Whether any token is configured (without tokens the HTTP server serves only loopback). */
  readonly enabled: boolean;
  /** The user a token maps to, or undefined for an unknown token. */
  userFor(token: string): string | undefined;
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export function createTokenLookup(api: ApiConfig | undefined): TokenLookup {
  const entries = Object.entries(api?.tokens ?? {}).map(([token, user]) => ({ hash: digest(token), user }));
  return {
    enabled: entries.length > 0,
    userFor(token) {
      if (!token) return undefined;
      const hash = digest(token);
      let found: string | undefined;
      // Every entry is compared, so the time taken does not tell which one matched.
      for (const e of entries) if (timingSafeEqual(e.hash, hash) && found === undefined) found = e.user;
      return found;
    },
  };
}

/** The token of an `Authorization: Bearer TOKEN` header value, or undefined. */
export function bearerToken(header: string | null | undefined): string | undefined {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return m?.[1];
}
