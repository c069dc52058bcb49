/**
 * pg-boss's schema beside stepd's (`<schema>_boss`), set up by `stepd migrate` so a DBA sees
 * everything the daemon needs: pg-boss's own construction (or migration) SQL, run as the migrating
 * role; the queue the schedules feed; and grants, so the daemon can run as a member of
 * `<schema>_executor`. Services (`<schema>_client`) get nothing here: they add schedules to
 * stepd's own table, and the daemon puts them into pg-boss.
 *
 * The daemon's pg-boss never migrates (`migrate: false`): it checks the version and refuses to
 * start schedules on a schema that `stepd migrate` has not brought up to date.
 */
import { createRequire } from 'node:module';
import pg from 'pg';
import { getConstructionPlans, getMigrationPlans, PgBoss, type Db } from 'pg-boss';
import { assertSchemaName } from '../db/connect.js';
import { MIGRATION_LOCK_TIMEOUT_MS, tryMigrationLock, waitForMigrationLock } from '../db/migrationLock.js';
import { schemaRoles } from '../db/roles.js';
import type { Logger } from '../logger.js';

/** The one queue every schedule of a stepd schema sends its ticks to (schedule NAME is the pg-boss key). */
export const SCHEDULE_QUEUE = 'stepd-schedules';

/** The pg-boss schema version this build of stepd runs (from pg-boss's package.json). */
export const BOSS_SCHEMA_VERSION: number = (createRequire(import.meta.url)('pg-boss/package.json') as { pgboss: { schema: number } }).pgboss.schema;

/** `<schema>_boss`: stepd schema names are at most 54 characters, so this fits in 63. */
export function bossSchemaName(schema: string): string {
  return `${assertSchemaName(schema)}_boss`;
}

/** pg-boss statements on one connection (a transaction of the caller's, when it has one open). */
export function clientDb(client: pg.ClientBase): Db {
  return { executeSql: (text, values) => client.query(text, values) };
}

/** The schedules queue's options: a tick's job is retried (a lost database) and kept a day. */
export const SCHEDULE_QUEUE_OPTIONS = { retryLimit: 5, retryDelay: 5, retryBackoff: true, expireInSeconds: 120, deleteAfterSeconds: 86_400 } as const;

/** The queue webhooks are delivered from (src/notify/notifier.ts): retried with back-off for about a day. */
export const NOTIFY_QUEUE = 'stepd-notify';
export const NOTIFY_QUEUE_OPTIONS = { retryLimit: 16, retryDelay: 2, retryBackoff: true, retryDelayMax: 3_600, expireInSeconds: 60, deleteAfterSeconds: 86_400 } as const;

export interface BossSchemaResult {
  schema: string;
  /** needs-dba: this login may not create (or upgrade) it; `sql` is what a DBA runs. */
  status: 'created' | 'migrated' | 'ready' | 'needs-dba';
  /** The installed pg-boss schema version (null when not installed). */
  version: number | null;
  /** Whether the executor and client roles were granted what they need (false: roles missing or not the owner). */
  granted: boolean;
  sql?: string;
}

/**
 * Creates or upgrades the pg-boss schema (pg-boss takes its own advisory lock, so concurrent
 * migrations are safe), creates the schedules queue and grants the two roles.
 *
 * One migrator at a time per schema (concurrent GRANTs on one object can fail), under a session
 * advisory lock whose key is known, so any connected role could take it (src/db/migrationLock.ts):
 * a schema already at this version only tries it (when another session holds it, the queue and
 * grants are left as they are); one to create or upgrade waits at most `lockTimeoutMs`, then
 * fails naming the holder.
 */
export async function migrateBossSchema(opts: { url: string; schema: string; log?: Logger; lockTimeoutMs?: number }): Promise<BossSchemaResult> {
  const boss = bossSchemaName(opts.schema);
  const client = new pg.Client({ connectionString: opts.url, application_name: 'stepd-migrate' });
  client.on('error', () => {});
  await client.connect();
  try {
    const seen = await schemaState(client, boss);
    if (seen.exists && !seen.usage) {
      return needsDba(opts, boss, null, `GRANT USAGE ON SCHEMA ${pg.escapeIdentifier(boss)} TO ${pg.escapeIdentifier(seen.me)};  -- then run stepd migrate again`);
    }
    const seenVersion = seen.exists ? await installedVersion(client, boss) : null;
    const lock = { key: `stepd.migrate.boss:${boss}`, scope: 'session' as const };
    if (seenVersion === null || seenVersion < BOSS_SCHEMA_VERSION) {
      await waitForMigrationLock(client, { ...lock, timeoutMs: opts.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS });
    } else if (!(await tryMigrationLock(client, lock))) {
      return { schema: boss, status: 'ready', version: seenVersion, granted: await executorMayUse(client, opts.schema, boss) };
    }
    // The lock goes with the session (client.end below).
    let status: BossSchemaResult['status'] = 'ready';
    const ns = await schemaState(client, boss);
    if (ns.exists && !ns.usage) {
      return needsDba(opts, boss, null, `GRANT USAGE ON SCHEMA ${pg.escapeIdentifier(boss)} TO ${pg.escapeIdentifier(ns.me)};  -- then run stepd migrate again`);
    }
    const before = ns.exists ? await installedVersion(client, boss) : null;
    // pg-boss's plans carry their own BEGIN/COMMIT; a failed one leaves its transaction to roll back.
    const run = async (sql: string) => {
      try {
        await client.query(sql);
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    };
    if (before === null) {
      // A DBA need only create the schema for this login; it installs pg-boss into it itself.
      if (ns.exists ? !ns.owner : !ns.mayCreate) {
        return needsDba(opts, boss, null, `CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(boss)} AUTHORIZATION ${pg.escapeIdentifier(ns.me)};  -- then run stepd migrate again`);
      }
      try {
        await run(getConstructionPlans(boss, { createSchema: !ns.exists }));
      } catch (err) {
        // Another migrator created it first (pg-boss reports the race as "already exists").
        if ((await installedVersion(client, boss)) === null) throw err;
      }
      status = 'created';
    } else if (before < BOSS_SCHEMA_VERSION) {
      if (!(await ownsSchema(client, boss))) return needsDba(opts, boss, before, `${getMigrationPlans(boss, before)};\n${bossGrantStatements(opts.schema).map((x) => `${x};`).join('\n')}`);
      await run(getMigrationPlans(boss, before));
      status = 'migrated';
    }
    if (status !== 'ready') opts.log?.info({ schema: boss, version: BOSS_SCHEMA_VERSION, status }, 'pg-boss schema ready');
    const manager = new PgBoss({ db: clientDb(client), schema: boss, migrate: false, schedule: false, supervise: false });
    // createQueue always takes pg-boss's own advisory lock (a known key, 30 s lock_timeout): not when the queue is there.
    if (!(await manager.getQueue(SCHEDULE_QUEUE))) await manager.createQueue(SCHEDULE_QUEUE, SCHEDULE_QUEUE_OPTIONS);
    if (!(await manager.getQueue(NOTIFY_QUEUE))) await manager.createQueue(NOTIFY_QUEUE, NOTIFY_QUEUE_OPTIONS);
    const granted = (await ownsSchema(client, boss)) && (await grantBossSchema(client, opts.schema));
    return { schema: boss, status, version: await installedVersion(client, boss), granted };
  } finally {
    await client.end().catch(() => {});
  }
}

function needsDba(opts: { schema: string; log?: Logger }, boss: string, version: number | null, sql: string): BossSchemaResult {
  opts.log?.warn({ schema: boss, version, wanted: BOSS_SCHEMA_VERSION }, 'this login may not create or upgrade the pg-boss schema; schedules wait until a DBA runs the SQL stepd migrate prints');
  return { schema: boss, status: 'needs-dba', version, granted: false, sql };
}

/** Whether the schema exists, whether this login owns it or may use it, or may create it. */
async function schemaState(client: pg.ClientBase, boss: string): Promise<{ exists: boolean; owner: boolean; usage: boolean; mayCreate: boolean; me: string }> {
  const { rows } = await client.query<{ exists: boolean; owner: boolean | null; usage: boolean | null; may: boolean; me: string }>(
    `SELECT n.oid IS NOT NULL AS exists, pg_has_role(current_user, n.nspowner, 'USAGE') AS owner,
            has_schema_privilege(current_user, n.oid, 'USAGE') AS usage,
            has_database_privilege(current_user, current_database(), 'CREATE') AS may, current_user::text AS me
       FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1`,
    [boss],
  );
  const r = rows[0]!;
  return { exists: r.exists, owner: r.owner === true, usage: r.usage === true, mayCreate: r.may, me: r.me };
}

/** Whether the executor role may use the schema (what the grants give it), read without changing anything. */
async function executorMayUse(client: pg.ClientBase, schema: string, boss: string): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>(
    `SELECT has_schema_privilege(r.oid, n.oid, 'USAGE') AS ok FROM pg_roles r, pg_namespace n WHERE r.rolname = $1 AND n.nspname = $2`,
    [schemaRoles(schema).executor, boss],
  );
  return rows[0]?.ok === true;
}

async function ownsSchema(client: pg.ClientBase, boss: string): Promise<boolean> {
  const { rows } = await client.query<{ owner: boolean | null }>(`SELECT pg_has_role(current_user, n.nspowner, 'USAGE') AS owner FROM pg_namespace n WHERE n.nspname = $1`, [boss]);
  return rows[0]?.owner === true;
}

async function installedVersion(client: pg.ClientBase, boss: string): Promise<number | null> {
  const table = `${pg.escapeIdentifier(boss)}.version`;
  const { rows } = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table]);
  if (!rows[0]?.t) return null;
  const { rows: v } = await client.query<{ version: number }>(`SELECT version FROM ${table}`);
  return v[0] ? Number(v[0].version) : null;
}

/** The grants on the pg-boss schema, as statements (also printed for a DBA by `stepd migrate`). */
export function bossGrantStatements(schema: string): string[] {
  const boss = pg.escapeIdentifier(bossSchemaName(schema));
  const r = schemaRoles(schema);
  const executor = pg.escapeIdentifier(r.executor);
  const clientRole = pg.escapeIdentifier(r.client);
  return [
    // The daemon runs pg-boss: its queues, jobs, schedules, cron claims and maintenance.
    `GRANT USAGE ON SCHEMA ${boss} TO ${executor}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${boss} TO ${executor}`,
    `GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ${boss} TO ${executor}`,
    `GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ${boss} TO ${executor}`,
    // Clients have nothing here: `stepd schedule add|remove` writes stepd's schedules table only,
    // and the daemon keeps pg-boss's schedules in step with it (scheduler.ts). A row a client
    // could write here would make pg-boss send jobs naming any schedule. Earlier versions granted
    // the client role pg-boss's schedule table: taken back on every migrate.
    `REVOKE ALL ON ALL TABLES IN SCHEMA ${boss} FROM ${clientRole}`,
    `REVOKE USAGE ON SCHEMA ${boss} FROM ${clientRole}`,
  ];
}

async function grantBossSchema(client: pg.ClientBase, schema: string): Promise<boolean> {
  const r = schemaRoles(schema);
  const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_roles WHERE rolname = ANY($1::text[])', [[r.executor, r.client]]);
  if (rows[0]?.n !== 2) return false;
  for (const statement of bossGrantStatements(schema)) await client.query(statement);
  return true;
}
