/**
 * PostgreSQL connections. Executor connections carry `stepd.executor=on` (so the guard
 * trigger lets their writes through and the wake-up trigger stays quiet) and a search_path
 * of the stepd schema; client connections (CLI, other services) carry neither.
 *
 * A lost connection never kills the process: `pg` emits 'error' on a client whose connection
 * dies (idle in the pool, checked out, or dedicated), and an 'error' event without a listener
 * throws. Every client made here has a listener for its whole life; the work in flight on it
 * fails with a ConnectionLostError (retryable), and the pool replaces the client.
 */
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { ConnectionLostError, isConnectionError } from './connectionErrors.js';
import type { Database } from './tables.js';

// bigint ids stay strings (exact); int8 counts come back as strings unless cast to int.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,53}$/;

export function assertSchemaName(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`invalid schema name "${schema}": use lower-case letters, digits and underscores, starting with a letter or _, at most 54 characters`);
  }
  return schema;
}

export { ConnectionLostError, isConnectionError } from './connectionErrors.js';

export interface PoolOptions {
  url: string;
  schema: string;
  /** Executor connections may write outside the SQL contract. */
  role: 'executor' | 'client';
  max?: number;
  applicationName?: string;
  /** false: silence the events the database itself announces (SET stepd.events = off). */
  events?: boolean;
  /** Told of connection errors of the pool's clients (default: ignored; the work in flight fails on its own). */
  onConnectionError?: (err: Error) => void;
}

function connectionOptions(opts: PoolOptions): string {
  const options = [`-c search_path=${opts.schema},public`];
  // The executor's claim statements announce step.started themselves (sql/0016).
  if (opts.role === 'executor') options.push('-c stepd.executor=on', '-c stepd.started_events=statement');
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
    // TCP keepalive: a connection to a host that vanished (no RST) is noticed, not waited on forever.
    keepAlive: true,
  });
  const onError = opts.onConnectionError ?? (() => {});
  // An idle client that loses its connection is dropped by the pool (which then emits 'error');
  // a checked-out one emits 'error' itself: both must have a listener or the process exits.
  pool.on('error', (err) => onError(err));
  pool.on('connect', (client) => client.on('error', (err) => onError(err)));
  return pool;
}

/** A dedicated connection (LISTEN, session advisory locks), with the same settings as the pool. */
export function createClient(opts: PoolOptions): pg.Client {
  assertSchemaName(opts.schema);
  const client = new pg.Client({
    connectionString: opts.url,
    options: connectionOptions(opts),
    application_name: opts.applicationName ?? `stepd-${opts.role}-listener`,
    connectionTimeoutMillis: 10_000,
    // TCP keepalive: a connection to a host that vanished (no RST) is noticed, not waited on forever.
    keepAlive: true,
  });
  // The owner adds its own listener to notice the loss; this one keeps a late error harmless.
  client.on('error', (err) => opts.onConnectionError?.(err));
  return client;
}

/** Kysely over a pool, for typed read-side queries. */
export function createKysely(pool: pg.Pool): Kysely<Database> {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/**
 * The BEGIN of the executor's batch transactions (admission, outcomes), in one round trip: for
 * the rest of the transaction the planner prefers index scans to sequential and bitmap scans.
 * Their statements touch rows by id, or through a partial index in id order, and a plan built
 * on statistics from before a burst (a table PostgreSQL still thinks holds a few new workflows
 * while ten thousand wait) otherwise scans every new or running workflow in each batch: work
 * that grows with the backlog. A statement with no usable index still runs, as a sequential
 * scan. docs/performance.md has the measurements.
 */
const BEGIN_PREFERRING_INDEX_SCANS = 'BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off';

export interface TransactionOptions {
  /** Plan this transaction's statements with index scans where one exists (BEGIN_PREFERRING_INDEX_SCANS). */
  preferIndexScans?: boolean;
  /**
   * A lock not granted within this many milliseconds fails the statement (55P03) instead of
   * waiting, for the whole transaction: set in the BEGIN's round trip (no statement of its own).
   */
  lockTimeoutMs?: number;
}

/** The BEGIN sent for `opts`, in one round trip (the setting is a whole number of milliseconds, never a user value). */
function beginStatement(opts: TransactionOptions): string {
  const begin = opts.preferIndexScans ? BEGIN_PREFERRING_INDEX_SCANS : 'BEGIN';
  if (opts.lockTimeoutMs === undefined) return begin;
  const ms = Math.max(1, Math.round(opts.lockTimeoutMs));
  if (!Number.isSafeInteger(ms)) throw new RangeError(`lockTimeoutMs must be a finite number of milliseconds, not ${opts.lockTimeoutMs}`);
  return `${begin}; SET LOCAL lock_timeout = ${ms}`;
}

/**
 * Runs `fn` in a transaction on a pooled connection; rolls back on error. If the connection is
 * lost meanwhile, it fails with a ConnectionLostError and the broken client leaves the pool.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw isConnectionError(err) ? new ConnectionLostError(err) : err;
  }
  let lost: Error | undefined;
  const onError = (err: Error) => (lost ??= err);
  client.on('error', onError);
  let failure: unknown;
  try {
    await client.query(beginStatement(opts));
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    failure = err;
    if (lost || isConnectionError(err)) throw new ConnectionLostError(lost ?? err);
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.removeListener('error', onError);
    // A client whose connection failed is discarded rather than handed to the next caller.
    client.release(lost ?? (failure !== undefined && isConnectionError(failure) ? (failure as Error) : undefined));
  }
}
