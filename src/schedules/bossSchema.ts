/**
 * pg-boss's schema beside stepd's (`<schema>_boss`), set up by `stepd migrate` so a DBA sees
 * everything the daemon needs: pg-boss's own construction (or migration) SQL, run as the migrating
 * role; the queue the schedules feed; and grants, so the daemon can run as a member of
 * `<schema>_executor` and services as members of `<schema>_client` can add schedules.
 *
 * The daemon's pg-boss never migrates (`migrate: false`): it checks the version and refuses to
 * start schedules on a schema that `stepd migrate` has not brought up to date.
 */
import { createRequire } from 'node:module';
import pg from 'pg';
import { getConstructionPlans, getMigrationPlans, PgBoss, type Db } from 'pg-boss';
import { assertSchemaName } from '../db/connect.js';
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

export interface BossSchemaResult {
  schema: string;
  status: 'created' | 'migrated' | 'ready';
  version: number;
  /** Whether the executor and client roles were granted what they need (false: roles missing or not the owner). */
  granted: boolean;
}

/**
 * Creates or upgrades the pg-boss schema (pg-boss takes its own advisory lock, so concurrent
 * migrations are safe), creates the schedules queue and grants the two roles.
 */
export async function migrateBossSchema(opts: { url: string; schema: string; log?: Logger }): Promise<BossSchemaResult> {
  const boss = bossSchemaName(opts.schema);
  const client = new pg.Client({ connectionString: opts.url, application_name: 'stepd-migrate' });
  client.on('error', () => {});
  await client.connect();
  try {
    let status: BossSchemaResult['status'] = 'ready';
    const before = await installedVersion(client, boss);
    if (before === null) {
      try {
        await client.query(getConstructionPlans(boss));
      } catch (err) {
        // Another migrator created it first (pg-boss reports the race as "already exists").
        if ((await installedVersion(client, boss)) === null) throw err;
      }
      status = 'created';
    } else if (before < BOSS_SCHEMA_VERSION) {
      await client.query(getMigrationPlans(boss, before));
      status = 'migrated';
    }
    if (status !== 'ready') opts.log?.info({ schema: boss, version: BOSS_SCHEMA_VERSION, status }, 'pg-boss schema ready');
    const manager = new PgBoss({ db: clientDb(client), schema: boss, migrate: false, schedule: false, supervise: false });
    await manager.createQueue(SCHEDULE_QUEUE, { retryLimit: 5, retryDelay: 5, retryBackoff: true, expireInSeconds: 120, deleteAfterSeconds: 86_400 });
    const granted = await grantBossSchema(client, opts.schema);
    return { schema: boss, status, version: (await installedVersion(client, boss)) ?? BOSS_SCHEMA_VERSION, granted };
  } finally {
    await client.end().catch(() => {});
  }
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
    // The daemon runs pg-boss: its queues, jobs, cron claims and maintenance.
    `GRANT USAGE ON SCHEMA ${boss} TO ${executor}, ${clientRole}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${boss} TO ${executor}`,
    `GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ${boss} TO ${executor}`,
    `GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ${boss} TO ${executor}`,
    // `stepd schedule add|remove` writes the pg-boss schedule row next to stepd's own; what a tick
    // starts, and as whom, comes from stepd's schedules table, never from this row.
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ${boss}.schedule TO ${clientRole}`,
  ];
}

async function grantBossSchema(client: pg.ClientBase, schema: string): Promise<boolean> {
  const r = schemaRoles(schema);
  const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_roles WHERE rolname = ANY($1::text[])', [[r.executor, r.client]]);
  if (rows[0]?.n !== 2) return false;
  const { rows: own } = await client.query<{ owner: boolean | null }>(
    `SELECT pg_has_role(current_user, n.nspowner, 'USAGE') AS owner FROM pg_namespace n WHERE n.nspname = $1`,
    [bossSchemaName(schema)],
  );
  if (own[0]?.owner !== true) return false;
  for (const statement of bossGrantStatements(schema)) await client.query(statement);
  return true;
}
