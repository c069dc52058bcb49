/**
 * The migrators' advisory locks (`stepd.migrate` for stepd's schemas, `stepd.migrate.boss:<name>`
 * for pg-boss's). Advisory locks can be taken by any role that can connect, and these keys are
 * known, so a migrator never waits on one unless it has something to do, and then for a bounded
 * time: with nothing pending it only tries the lock (and leaves the idempotent grants to whoever
 * holds it); with something pending it waits at most `timeoutMs` (lock_timeout), then fails with
 * a MigrationLockBusyError naming the sessions that hold the lock (from pg_locks and
 * pg_stat_activity: pid, role and application_name are visible to every role).
 */
import type pg from 'pg';

/** How long a migrator with pending work waits for the lock by default. */
export const MIGRATION_LOCK_TIMEOUT_MS = 60_000;

export interface LockHolder {
  pid: number;
  role: string | null;
  applicationName: string | null;
}

export class MigrationLockBusyError extends Error {
  readonly code = 'migration_lock_busy';
  constructor(
    readonly lock: string,
    readonly waitedMs: number,
    readonly holders: LockHolder[],
  ) {
    const who = holders.length > 0 ? holders.map((h) => `pid ${h.pid} (role ${h.role ?? '?'}, application "${h.applicationName ?? ''}")`).join(', ') : 'a session that has let go of it since';
    const end = holders.map((h) => `SELECT pg_terminate_backend(${h.pid});`).join(' ');
    super(
      `stepd migrate: the migration lock "${lock}" was not free within ${waitedMs} ms; it is held by ${who}. ` +
        `Another migration may be running: try again once it is done. If the holder is not a migrator, end its session${end ? ` (${end})` : ''} and try again.`,
    );
    this.name = 'MigrationLockBusyError';
  }
}

export type LockScope = 'transaction' | 'session';

/** Takes the lock if it is free at once (never waits). */
export async function tryMigrationLock(client: pg.ClientBase, v: { key: string; scope: LockScope }): Promise<boolean> {
  const fn = v.scope === 'transaction' ? 'pg_try_advisory_xact_lock' : 'pg_try_advisory_lock';
  const { rows } = await client.query<{ ok: boolean }>(`SELECT ${fn}(hashtextextended($1, 0)) AS ok`, [v.key]);
  return rows[0]?.ok === true;
}

/**
 * Waits for the lock at most `timeoutMs`. A transaction-scoped wait runs inside the caller's
 * open transaction; when it times out, that transaction is rolled back (it is aborted anyway).
 */
export async function waitForMigrationLock(client: pg.ClientBase, v: { key: string; scope: LockScope; timeoutMs: number }): Promise<void> {
  const local = v.scope === 'transaction';
  const { rows } = await client.query<{ t: string }>(`SELECT current_setting('lock_timeout') AS t`);
  const before = rows[0]?.t ?? '0';
  await client.query(`SELECT set_config('lock_timeout', $1, $2)`, [`${Math.max(1, Math.round(v.timeoutMs))}ms`, local]);
  try {
    await client.query(`SELECT ${local ? 'pg_advisory_xact_lock' : 'pg_advisory_lock'}(hashtextextended($1, 0))`, [v.key]);
  } catch (err) {
    if ((err as { code?: string }).code !== '55P03') throw err;
    if (local) await client.query('ROLLBACK');
    else await client.query(`SELECT set_config('lock_timeout', $1, false)`, [before]);
    throw new MigrationLockBusyError(v.key, v.timeoutMs, await holdersOfAdvisoryLock(client, v.key));
  }
  await client.query(`SELECT set_config('lock_timeout', $1, $2)`, [before, local]);
}

/** Lets a session-scoped lock go (a transaction-scoped one goes with its transaction). */
export async function releaseMigrationLock(client: pg.ClientBase, v: { key: string; scope: LockScope }): Promise<void> {
  if (v.scope === 'session') await client.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [v.key]);
}

/** The sessions holding the advisory lock `key` (a bigint key: classid and objid are its halves). */
export async function holdersOfAdvisoryLock(client: pg.ClientBase, key: string): Promise<LockHolder[]> {
  const { rows } = await client.query<{ pid: number; role: string | null; app: string | null }>(
    `WITH k AS (SELECT hashtextextended($1, 0) AS v)
     SELECT l.pid, a.usename::text AS role, a.application_name AS app
       FROM k, pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = oid((k.v >> 32) & 4294967295) AND l.objid = oid(k.v & 4294967295)
      ORDER BY l.pid`,
    [key],
  );
  return rows.map((r) => ({ pid: r.pid, role: r.role, applicationName: r.app }));
}
