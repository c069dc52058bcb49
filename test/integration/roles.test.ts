/**
 * The roles `migrate()` sets up are enough to run stepd without a superuser: a daemon whose
 * login is only a member of <schema>_executor runs workflows; a client holding <schema>_client
 * drives the contract; a migrator that may not create roles gets the SQL a DBA runs.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestSchema, insertWorkflow, onCleanup, startExecutor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

async function loginRole(t: TestSchema, grant: string | null, extra = ''): Promise<{ role: string; url: string }> {
  const role = `r_${randomBytes(5).toString('hex')}`;
  await t.db.query(`CREATE ROLE ${role} LOGIN ${extra}`);
  if (grant) await t.db.query(`GRANT ${grant} TO ${role}`);
  onCleanup(async () => {
    await t.db.query(`DROP OWNED BY ${role}`).catch(() => {});
    await t.db.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
  });
  const url = new URL(t.url);
  url.username = role;
  return { role, url: url.toString() };
}

describe('the schema roles', () => {
  it('lets a daemon whose login only holds <schema>_executor run a workflow a <schema>_client role started', async () => {
    const t = await createTestSchema();
    const exec = await loginRole(t, `${t.schema}_executor`);
    const app = await loginRole(t, `${t.schema}_client`);
    // `stepd start` migrates first: as a mere executor member that only reads the log.
    expect(await migrate({ url: exec.url, schema: t.schema })).toMatchObject({ applied: [], roles: { status: 'not-owner' } });
    await startExecutor({ ...t, url: exec.url });
    const client = new pg.Pool({ connectionString: app.url, max: 1 });
    onCleanup(() => client.end());
    const { rows } = await client.query(
      `INSERT INTO ${t.schema}.workflows (name, flow, input) VALUES ('hello', $1, '{"who":"x"}') RETURNING id`,
      [JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: { v: '{{input.who}}' }, next: 'b' }, b: { tool: 'core.echo', args: { v: 2 } } } })],
    );
    const wf = await waitForWorkflow(t, rows[0].id);
    expect(wf.status).toBe('completed');
    // The database recorded who wrote it; a client with no `clients` entry runs as itself.
    expect(wf).toMatchObject({ created_role: app.role, created_by: app.role });
  });

  it('keeps the executor marker from granting a client role anything', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const app = await loginRole(t, `${t.schema}_client`);
    const id = await insertWorkflow(t, { start: 'g', steps: { g: { approval: {} } } });
    const wf = await waitForWorkflow(t, id, ['running']);
    const client = new pg.Client({ connectionString: app.url, options: '-c stepd.executor=on' });
    await client.connect();
    onCleanup(() => client.end());
    await expect(client.query(`UPDATE ${t.schema}.workflows SET status = 'completed', completed_at = now() WHERE id = $1`, [wf.id])).rejects.toMatchObject({
      code: '42501',
    });
    await expect(client.query(`UPDATE ${t.schema}.workflows SET status = 'new' WHERE id = $1`, [wf.id])).rejects.toMatchObject({
      code: '23514',
      message: expect.stringMatching(/can only be set to 'cancelled'/),
    });
  });

  it('gives a migrator that may not create roles the SQL a DBA runs, and applies it once run', async () => {
    const t = await createTestSchema();
    const owner = await loginRole(t, null);
    const schema = `${t.schema}_own`;
    await t.db.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${owner.role}`);
    onCleanup(async () => {
      await t.db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await t.db.query(`DROP ROLE IF EXISTS ${schema}_executor`).catch(() => {});
      await t.db.query(`DROP ROLE IF EXISTS ${schema}_client`).catch(() => {});
      await t.db.query(`DROP ROLE IF EXISTS ${schema}_worker`).catch(() => {});
    });
    const first = await migrate({ url: owner.url, schema });
    expect(first.roles.status).toBe('needs-dba');
    expect(first.rolesSql).toContain(`CREATE ROLE "${schema}_executor" NOLOGIN`);
    expect(first.rolesSql).toContain(`GRANT UPDATE (status, result, readied_by) ON "${schema}"."workflow_steps" TO "${schema}_client"`);
    await t.db.query(first.rolesSql!);
    const again = await migrate({ url: owner.url, schema });
    expect(again).toMatchObject({ applied: [], changed: [], roles: { status: 'ready' } });
  });

  it('reports an applied migration whose file was edited since, instead of skipping it silently', async () => {
    const t = await createTestSchema();
    await t.db.query(`UPDATE ${t.schema}.stepd_migrations SET checksum = 'edited' WHERE name = '0001_tables.sql'`);
    const again = await migrate({ url: t.url, schema: t.schema });
    expect(again.changed).toEqual(['0001_tables.sql']);
  });
});
