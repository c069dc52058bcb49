/**
 * Applies the numbered DDL files in sql/ in order, under an advisory lock, recording each in
 * <schema>.stepd_migrations. Applying twice changes nothing.
 */
import { readdir, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { assertSchemaName } from './connect.js';
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
}

export async function migrate(opts: { url: string; schema: string; log?: Logger; sqlDir?: string }): Promise<MigrateResult> {
  const schema = assertSchemaName(opts.schema);
  const dir = opts.sqlDir ?? findSqlDir();
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  const client = new pg.Client({ connectionString: opts.url, application_name: 'stepd-migrate' });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(hashtextextended('stepd.migrate', 0))`);
    const ident = client.escapeIdentifier(schema);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident}`);
    await client.query(`SET LOCAL search_path TO ${ident}`);
    await client.query(`CREATE TABLE IF NOT EXISTS stepd_migrations (
      name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await client.query<{ name: string }>('SELECT name FROM stepd_migrations')).rows.map((r) => r.name));
    const result: MigrateResult = { applied: [], alreadyApplied: [] };
    for (const file of files) {
      if (done.has(file)) {
        result.alreadyApplied.push(file);
        continue;
      }
      await client.query(await readFile(path.join(dir, file), 'utf8'));
      await client.query('INSERT INTO stepd_migrations (name) VALUES ($1)', [file]);
      result.applied.push(file);
      opts.log?.info({ schema, migration: file }, 'migration applied');
    }
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}
