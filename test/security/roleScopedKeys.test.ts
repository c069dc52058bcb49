/**
 * Concurrency key values are counted per role (src/flow/capacity.ts roleScopedKey, sql/0038): the
 * stored value is `encodeURIComponent(created_role)/value`. An attacker picks both its key values
 * and (at creation, through an operator) look-alike role names; it must never land in another
 * role's namespace. The executor's own rows (no role) are `/value`, which no role can reach:
 * PostgreSQL has no role named ''.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { MAX_KEY_CHARS, renderKey, roleScopedKey } from '../../src/flow/capacity.js';
import { TEST_DATABASE_URL } from '../helpers/db.js';

const ROLES = ['a', 'a/b', 'a%2Fb', 'a%252Fb', 'a%', 'a_', 'a*', '%', '_', '*', '/', 'A', 'ü', 'u\u0308', '"a"', "a'b", 'a\\b', 'a b', 'a+b', 'a%20b', 'x'.repeat(63), 'ü'.repeat(31)];
const KEYS = ['', 'x', '/x', 'b/x', '2Fb/x', '%2Fb/x', 'x/', '/', '%', 'ü', 'a/b/x'];

describe('role-scoped concurrency keys', () => {
  it('no two (role, value) pairs share a stored key, and the role is always what precedes the first `/`', () => {
    const seen = new Map<string, string>();
    for (const role of [null, ...ROLES]) {
      for (const key of KEYS) {
        const stored = roleScopedKey(role, key);
        const pair = JSON.stringify([role, key]);
        expect(seen.get(stored), `${pair} collides with ${seen.get(stored)}`).toBeUndefined();
        seen.set(stored, pair);
        const cut = stored.indexOf('/');
        expect(decodeURIComponent(stored.slice(0, cut))).toBe(role ?? '');
        expect(stored.slice(cut + 1)).toBe(key);
      }
    }
  });

  it('the sample: role `a` choosing value `b/x` does not reach role `a/b` value `x`; the executor’s `/x` is no role’s', () => {
    expect(roleScopedKey('a', 'b/x')).toBe('a/b/x');
    expect(roleScopedKey('a/b', 'x')).toBe('a%2Fb/x');
    expect(roleScopedKey('a', '%2Fb/x')).not.toBe(roleScopedKey('a/b', 'x'));
    for (const role of ROLES) expect(roleScopedKey(role, 'x')).not.toBe(roleScopedKey(null, 'x'));
  });

  it('a value cut to MAX_KEY_CHARS is cut before the role is put in front: a long value cannot push the role out', () => {
    const long = 'v'.repeat(MAX_KEY_CHARS * 2);
    const stored = roleScopedKey('x'.repeat(63), renderKey('{{input.k}}', { input: { k: long } } as never));
    expect(stored.startsWith(`${'x'.repeat(63)}/`)).toBe(true);
    expect(stored.length).toBe(64 + MAX_KEY_CHARS);
  });

  it('PostgreSQL has no role named "" (so `/value` stays the executor’s), and a created_role is always a real session_user', async () => {
    const db = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await db.connect();
    try {
      const err = await db.query(`CREATE ROLE ""`).then(() => undefined, (e: { code: string }) => e);
      expect(err?.code).toBe('42601');
    } finally {
      await db.end();
    }
  });
});
