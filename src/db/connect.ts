/**
 * PostgreSQL connections. Executor connections carry `stepd.executor=on` (so the guard
 * trigger lets their writes through and the wake-up trigger stays quiet) and a search_path
 * of the stepd schema; client connections (CLI, other services) carry neither.
 */
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import type { Database } from './tables.js';

// bigint ids stay strings (exact); int8 counts come back as strings unless cast to int.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,53}$/;

export function assertSchemaName(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`invalid schema name "${schema}": use lower-case letters, digits and underscores, starting with a letter or _, at most 54 characters`);
  }
  return schema;
}

export interface PoolOptions {
  url: string;
  schema: string;
  /** Executor connections may write outside the SQL contract. */
  role: 'executor' | 'client';
  max?: number;
  applicationName?: string;
  /** false: silence the events the database itself announces (SET stepd.events = off). */
  events?: boolean;
}

function connectionOptions(opts: PoolOptions): string {
  const options = [`-c search_path=${opts.schema},public`];
  if (opts.role === 'executor') options.push('-c stepd.executor=on');
  if (opts.events === false) options.push('-c stepd.events=off');
  return options.join(' ');
}

export function createPool(opts: PoolOptions): pg.Pool {
  assertSchemaName(opts.schema);
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? 10,
    options: connectionOptions(opts),
    application_name: opts.applicationName ?? `stepd-${opts.role}`,
    connectionTimeoutMillis: 10_000,
  });
  // An idle client that loses its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  return pool;
}

/** A dedicated connection (LISTEN, session advisory locks), with the same settings as the pool. */
export function createClient(opts: PoolOptions): pg.Client {
  assertSchemaName(opts.schema);
  return new pg.Client({
    connectionString: opts.url,
    options: connectionOptions(opts),
    application_name: opts.applicationName ?? `stepd-${opts.role}-listener`,
    connectionTimeoutMillis: 10_000,
  });
}

/** Kysely over a pool, for typed read-side queries. */
export function createKysely(pool: pg.Pool): Kysely<Database> {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/** Runs `fn` in a transaction on a pooled connection; rolls back on error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
