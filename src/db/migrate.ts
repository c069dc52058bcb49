/**
 * Applies the numbered DDL files in sql/ in order, under an advisory lock, recording each with
 * its checksum in <schema>.stepd_migrations. Applying twice changes nothing; a file edited after
 * it was applied is reported (`changed`), never silently skipped. Then sets up the schema's two
 * roles (src/db/roles.ts) when this role may, or returns the SQL a DBA runs (`rolesSql`).
 *
 * The lock's key is known and any role that can connect may take it (migrationLock.ts), so the
 * log is read first: with nothing pending the lock is only tried (when another session holds it,
 * the idempotent grants are left as they are); with something pending the migrator waits at most
 * `lockTimeoutMs`, then fails naming the holder.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { assertSchemaName } from './connect.js';
import { createRoleStatement, grantStatements, roleSetupScript, schemaRoles } from './roles.js';
import { bossGrantStatements, migrateBossSchema, type BossSchemaResult } from '../schedules/bossSchema.js';
import { MIGRATION_LOCK_TIMEOUT_MS, releaseMigrationLock, tryMigrationLock, waitForMigrationLock } from './migrationLock.js';
import type { Logger } from '../logger.js';

/** The sql/ folder of this package, found from this module's location (src/ or dist/src/). */
export function findSqlDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = path.join(dir, 'sql');
    if (existsSync(path.join(candidate, '0001_tables.sql'))) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error('stepd: cannot find the sql/ migrations folder next to the package');
}

export interface MigrateResult {
  applied: string[];
  alreadyApplied: string[];
  /** Applied files whose content changed since (their checksum differs): not re-applied. */
  changed: string[];
  /** The schema's roles: created or already there and granted, or the SQL a DBA must run. */
  roles: { executor: string; client: string; status: 'ready' | 'needs-dba' | 'not-owner' };
  /** When status is 'needs-dba': the statements to run as a role that may create roles. */
  rolesSql?: string;
  /** pg-boss's schema beside this one (schedules; src/schedules/bossSchema.ts). */
  boss?: BossSchemaResult;
}

const checksum = (text: string): string => createHash('sha256').update(text).digest('hex');

/** One key for every schema of the database (as in earlier versions, which still take it). */
const MIGRATE_LOCK = 'stepd.migrate';

export interface MigrateOptions {
  url: string;
  schema: string;
  log?: Logger;
  sqlDir?: string;
  /** How long to wait for the migration lock when something is pending (default 60 s). */
  lockTimeoutMs?: number;
}

export async function migrate(opts: MigrateOptions): Promise<MigrateResult> {
  const schema = assertSchemaName(opts.schema);
  const dir = opts.sqlDir ?? findSqlDir();
  const names = (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  const files = await Promise.all(names.map(async (name) => ({ name, text: await readFile(path.join(dir, name), 'utf8') })));
  const client = new pg.Client({ connectionString: opts.url, application_name: 'stepd-migrate' });
  client.on('error', () => {});
  await client.connect();
  try {
    const ident = client.escapeIdentifier(schema);
    const lockTimeoutMs = opts.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS;
    // The log is read, and the lock taken, before the transaction: a migrator waiting for the lock
    // holds no lock on the log (its holder alters it: they would deadlock), and the transaction
    // begun after it sees the catalogue as the holder left it.
    const seen = await readApplied(client, schema);
    const somethingPending = seen.size === 0 || files.some((f) => !seen.has(f.name));
    const lock = { key: MIGRATE_LOCK, scope: 'session' as const };
    let locked = true;
    if (somethingPending) await waitForMigrationLock(client, { ...lock, timeoutMs: lockTimeoutMs });
    else locked = await tryMigrationLock(client, lock);
    await client.query('BEGIN');
    // Read again under the lock: another migrator may have applied them while this one waited.
    const applied = locked ? await readApplied(client, schema) : seen;
    const pending = files.filter((f) => !applied.has(f.name));
    const result: MigrateResult = {
      applied: [],
      alreadyApplied: [],
      changed: [],
      roles: { ...schemaRoles(schema), status: 'ready' },
    };
    if (pending.length > 0 || applied.size === 0) {
      // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
      const { rows: ns } = await client.query<{ n: string | null }>('SELECT to_regnamespace($1)::text AS n', [ident]);
      if (!ns[0]?.n) await client.query(`CREATE SCHEMA ${ident}`);
      await client.query(`SET LOCAL search_path TO ${ident}`);
      await client.query(`CREATE TABLE IF NOT EXISTS stepd_migrations (
        name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      await client.query(`ALTER TABLE stepd_migrations ADD COLUMN IF NOT EXISTS checksum text`);
    } else {
      await client.query(`SET LOCAL search_path TO ${ident}`);
    }
    const ownerBefore = await ownsTables(client, schema);
    for (const file of files) {
      const sum = checksum(file.text);
      const known = applied.get(file.name);
      if (known !== undefined) {
        result.alreadyApplied.push(file.name);
        if (known === null && ownerBefore && locked) await client.query('UPDATE stepd_migrations SET checksum = $2 WHERE name = $1', [file.name, sum]);
        else if (known !== null && known !== sum) result.changed.push(file.name);
        continue;
      }
      await client.query(file.text);
      await client.query('INSERT INTO stepd_migrations (name, checksum) VALUES ($1, $2)', [file.name, sum]);
      result.applied.push(file.name);
      opts.log?.info({ schema, migration: file.name }, 'migration applied');
    }
    if (result.changed.length > 0) {
      opts.log?.warn({ schema, changed: result.changed }, 'applied migrations were edited since; the database keeps the version it applied');
    }
    if (!locked) opts.log?.debug({ schema }, 'nothing to migrate; another session holds the migration lock, so the grants are left as they are');
    await setUpRoles(client, schema, await ownsTables(client, schema), result, locked);
    if (result.roles.status === 'needs-dba') {
      opts.log?.warn({ schema, roles: schemaRoles(schema) }, 'this role may not create roles; a DBA must run the printed SQL (stepd migrate prints it)');
    }
    await client.query('COMMIT');
    if (locked) await releaseMigrationLock(client, lock);
    result.boss = await migrateBossSchema({ url: opts.url, schema, lockTimeoutMs, ...(opts.log ? { log: opts.log } : {}) });
    // The DBA's script grants on pg-boss's schema too, once it exists (else boss.sql creates it).
    if (result.rolesSql && result.boss.status !== 'needs-dba') result.rolesSql += `\n${bossGrantStatements(schema).map((s) => `${s};`).join('\n')}`;
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}

/** Applied migrations and their checksums (null for files applied before checksums existed). */
async function readApplied(client: pg.Client, schema: string): Promise<Map<string, string | null>> {
  const table = `${client.escapeIdentifier(schema)}.stepd_migrations`;
  const { rows: exists } = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table]);
  if (!exists[0]?.t) return new Map();
  const { rows: cols } = await client.query<{ has: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'checksum' AND NOT attisdropped) AS has`,
    [table],
  );
  const select = cols[0]?.has ? `SELECT name, checksum FROM ${table}` : `SELECT name, NULL::text AS checksum FROM ${table}`;
  const { rows } = await client.query<{ name: string; checksum: string | null }>(select);
  return new Map(rows.map((r) => [r.name, r.checksum]));
}

/** Whether this session's role owns (is a member of the owner of) the workflows table. */
async function ownsTables(client: pg.Client, schema: string): Promise<boolean> {
  const { rows } = await client.query<{ owner: boolean | null }>(
    `SELECT pg_has_role(current_user, c.relowner, 'USAGE') AS owner FROM pg_class c WHERE c.oid = to_regclass($1)`,
    [`${client.escapeIdentifier(schema)}.workflows`],
  );
  return rows[0]?.owner === true;
}

/** `mayWrite`: under the migration lock (else only reports what is there, changing nothing). */
async function setUpRoles(client: pg.Client, schema: string, owner: boolean, result: MigrateResult, mayWrite: boolean): Promise<void> {
  const roles = schemaRoles(schema);
  const { rows: tableRows } = await client.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname <> 'stepd_migrations' ORDER BY c.relname`,
    [schema],
  );
  const tables = tableRows.map((r) => r.name);
  const { rows: existing } = await client.query<{ rolname: string }>(
    'SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])',
    [[roles.executor, roles.client, roles.worker]],
  );
  const missing = [roles.executor, roles.client, roles.worker].filter((r) => !existing.some((e) => e.rolname === r));
  if (missing.length > 0) {
    const { rows: me } = await client.query<{ may: boolean }>(
      'SELECT rolsuper OR rolcreaterole AS may FROM pg_roles WHERE rolname = current_user',
    );
    if (!me[0]?.may || !mayWrite) {
      result.roles.status = 'needs-dba';
      result.rolesSql = roleSetupScript(schema, tables);
      return;
    }
    for (const role of missing) await client.query(createRoleStatement(role));
  }
  if (!owner) {
    result.roles.status = 'not-owner';
    return;
  }
  if (!mayWrite) return;
  for (const statement of grantStatements(schema, tables)) await client.query(statement);
}
