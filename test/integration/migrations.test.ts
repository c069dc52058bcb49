/** Migrations: idempotent, recorded once with their checksums, safe when two migrators race. */
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { findSqlDir, migrate } from '../../src/db/migrate.js';
import { createTestSchema, dropSchemaAndRoles, onCleanup } from '../helpers/db.js';

const SQL_FILES = readdirSync(findSqlDir()).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();

describe('migrations', () => {
  it('applying them twice changes nothing and records each file once', async () => {
    const t = await createTestSchema();
    const snapshot = () =>
      t.q(
        `SELECT c.relname::text AS name, c.relkind::text AS kind, CASE WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) END AS def
           FROM pg_class c WHERE c.relnamespace = $1::regnamespace
         UNION ALL SELECT conname, 'k', pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = $1::regnamespace
         UNION ALL SELECT tgname, 't', pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid IN
           (SELECT oid FROM pg_class WHERE relnamespace = $1::regnamespace) AND NOT tgisinternal
         UNION ALL SELECT proname, 'f', md5(prosrc) FROM pg_proc WHERE pronamespace = $1::regnamespace
         ORDER BY 1, 2`,
        [t.schema],
      );
    const before = await snapshot();
    const recorded = await t.q(`SELECT name, applied_at, checksum FROM stepd.stepd_migrations ORDER BY name`);
    expect(recorded.map((r) => r.name)).toEqual(SQL_FILES);

    const again = await migrate({ url: t.url, schema: t.schema });
    expect(again).toMatchObject({ applied: [], alreadyApplied: SQL_FILES, changed: [], roles: { status: 'ready' } });
    expect(await snapshot()).toEqual(before);
    expect(await t.q(`SELECT name, applied_at, checksum FROM stepd.stepd_migrations ORDER BY name`)).toEqual(recorded);
  });

  it('two migrators racing on a fresh schema apply each file exactly once', async () => {
    const t = await createTestSchema();
    const schema = `${t.schema}_race`;
    onCleanup(() => dropSchemaAndRoles(t.db, schema));
    const results = await Promise.all([migrate({ url: t.url, schema }), migrate({ url: t.url, schema })]);
    expect(results.flatMap((r) => r.applied).sort()).toEqual(SQL_FILES);
    const rows = await t.db.query(`SELECT count(*)::int AS n FROM ${schema}.stepd_migrations`);
    expect(rows.rows[0].n).toBe(SQL_FILES.length);
  });
});
