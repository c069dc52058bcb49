/**
 * Whether a schema is migrated up to this package's sql/ files, without changing anything: for
 * applications that run stepd on a database someone else migrates (`startStepd({ migrate: false })`).
 */
import { readdir } from 'node:fs/promises';
import pg from 'pg';
import { assertSchemaName } from './connect.js';
import { findSqlDir } from './migrate.js';

/** This package's migrations the schema has not applied (all of them when it has none). */
export async function pendingMigrations(opts: { url: string; schema: string; sqlDir?: string }): Promise<string[]> {
  const schema = assertSchemaName(opts.schema);
  const names = (await readdir(opts.sqlDir ?? findSqlDir())).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  const client = new pg.Client({ connectionString: opts.url, application_name: 'stepd-schema-check' });
  client.on('error', () => {});
  await client.connect();
  try {
    const table = `${client.escapeIdentifier(schema)}.stepd_migrations`;
    const { rows: exists } = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table]);
    if (!exists[0]?.t) return names;
    const { rows } = await client.query<{ name: string }>(`SELECT name FROM ${table}`);
    const applied = new Set(rows.map((r) => r.name));
    return names.filter((n) => !applied.has(n));
  } finally {
    await client.end().catch(() => {});
  }
}
