/**
 * Roles that forge notifications. PostgreSQL has no privilege for NOTIFY: a LOGIN role with no
 * grants at all may send anything on any channel, and so may every client.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createLoginRole, onCleanup, type TestSchema } from './helpers.js';

export interface Forger {
  role: string;
  pool: pg.Pool;
  /** NOTIFYs each payload on `channel`, in one statement (one transaction: delivered together at commit). */
  notify(channel: string, payloads: string[]): Promise<void>;
  /** NOTIFYs `count` wake-ups claiming workflows `from`..`from+count-1` of `schema` were cancelled (the review's sample). */
  cancelFlood(schema: string, from: number, count: number): Promise<void>;
}

/** A LOGIN role (trust auth) granted nothing, dropped after the test. */
export async function createUngrantedRole(t: TestSchema): Promise<Forger> {
  const { role, url } = await createLoginRole(t, null, `nogrant_${randomBytes(5).toString('hex')}`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  return forgerOn(role, pool);
}

/** A forger on an existing pool (the client role's). */
export function forgerOn(role: string, pool: pg.Pool): Forger {
  return {
    role,
    pool,
    notify: async (channel, payloads) => {
      await pool.query(`SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS u(p, n) ORDER BY n`, [channel, payloads]);
    },
    cancelFlood: async (schema, from, count) => {
      await pool.query(
        `SELECT pg_notify('stepd_wakeup', json_build_object('schema', $1::text, 'table', 'workflows', 'id', g, 'status', 'cancelled')::text)
           FROM generate_series($2::bigint, $2::bigint + $3::bigint - 1) g`,
        [schema, from, count],
      );
    },
  };
}
