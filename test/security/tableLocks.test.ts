/**
 * PostgreSQL lets a table-level UPDATE, DELETE or TRUNCATE privilege take every LOCK TABLE mode:
 * with the old `GRANT DELETE ON workflows` a client held ACCESS EXCLUSIVE on workflows and every
 * executor statement and every other client waited. Clients now hold only column-level INSERT and
 * UPDATE and SELECT (LOCK TABLE: ACCESS SHARE at most; their own writes take ROW EXCLUSIVE) and
 * delete through delete_workflows / remove_schedule (sql/0020). Every table of the schema and of
 * pg-boss's schema is checked (read from pg_class, so future tables are covered), as the client
 * role and as a role with no grants at all.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { grantStatements } from '../../src/db/roles.js';
import {
  clientInsert,
  createClientRole,
  getSteps,
  getWorkflow,
  onCleanup,
  refused,
  schemaRoles,
  securityEnv,
  waitFor,
  waitForStep,
  waitForWorkflow,
  type ClientRole,
  type SecurityEnv,
} from './helpers.js';

const MODES_ABOVE_ROW_EXCLUSIVE = ['SHARE UPDATE EXCLUSIVE', 'SHARE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE'];
const ECHO_FLOW = { start: 'a', steps: { a: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } } };
const GATE_FLOW = {
  start: 'approve',
  steps: { approve: { approval: true, next: 'work' }, work: { tool: 'core.echo', args: { ok: 1 }, done: true, output: '{{result}}' } },
};

/** Every table of the schema and of `<schema>_boss` (when pg-boss's schema is there). */
async function everyTable(env: SecurityEnv): Promise<string[]> {
  const rows = await env.t.q<{ name: string }>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ANY($1::text[]) AND c.relkind IN ('r', 'p') ORDER BY 1`,
    [[env.t.schema, `${env.t.schema}_boss`]],
  );
  return rows.map((r) => r.name);
}

/** Every LOCK TABLE above ROW EXCLUSIVE is refused (42501) for `role`, on each table; NOWAIT so a granted one cannot hang the test. */
async function assertNoStrongLock(role: { pool: pg.Pool }, tables: string[]): Promise<void> {
  const conn = await role.pool.connect();
  try {
    for (const table of tables) {
      for (const mode of MODES_ABOVE_ROW_EXCLUSIVE) {
        await conn.query('BEGIN');
        const err = await conn.query(`LOCK TABLE ${table} IN ${mode} MODE NOWAIT`).then(
          () => undefined,
          (e: { code?: string; message: string }) => e,
        );
        await conn.query('ROLLBACK');
        expect(err, `LOCK TABLE ${table} IN ${mode} MODE was granted`).toBeDefined();
        expect([table, mode, err!.code]).toEqual([table, mode, '42501']);
      }
    }
  } finally {
    conn.release(true);
  }
}

/** A LOGIN role granted nothing at all (PUBLIC's defaults only); returns its connection URL. */
async function createUngrantedRole(env: SecurityEnv): Promise<string> {
  const role = `nogrant_${env.t.schema}`;
  await env.t.db.query(`CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN`);
  onCleanup(async () => {
    await env.t.db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]);
    await env.t.db.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`);
  });
  const url = new URL(env.client.url);
  url.username = role;
  return url.toString();
}

function poolFor(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  return pool;
}

describe('no client can lock a table above ROW EXCLUSIVE', () => {
  it('every table of the schema and of pg-boss: each mode above ROW EXCLUSIVE is refused with 42501, for the client role and a role with no grants', async () => {
    const env = await securityEnv();
    const tables = await everyTable(env);
    expect(tables).toEqual(expect.arrayContaining([`${env.t.schema}.workflows`, `${env.t.schema}.workflow_steps`, `${env.t.schema}.schedules`, `${env.t.schema}.flows`]));
    await assertNoStrongLock(env.client, tables);
    await assertNoStrongLock({ pool: poolFor(await createUngrantedRole(env)) }, tables);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('the client role holds no table-level privilege that PostgreSQL counts for LOCK TABLE (UPDATE, DELETE, TRUNCATE, MAINTAIN)', async () => {
    const env = await securityEnv();
    const [{ version }] = (await env.t.q<{ version: number }>(`SELECT current_setting('server_version_num')::int AS version`)) as [{ version: number }];
    const privileges = ['UPDATE', 'DELETE', 'TRUNCATE', ...(version >= 170000 ? ['MAINTAIN'] : [])];
    const held = await env.t.q(
      `SELECT t.name, p.privilege FROM unnest($2::text[]) AS t(name), unnest($3::text[]) AS p(privilege)
        WHERE has_table_privilege($1, t.name, p.privilege)`,
      [env.client.role, await everyTable(env), privileges],
    );
    expect(held).toEqual([]);
    // Existing deployments had DELETE on workflows and schedules: the migrator's grants take it back.
    // (The statements themselves: migrate() skips them while another session holds the migration lock.)
    const s = pg.escapeIdentifier(env.t.schema);
    await env.t.db.query(`GRANT DELETE ON ${s}.workflows, ${s}.schedules TO ${pg.escapeIdentifier(schemaRoles(env.t.schema).client)}`);
    const tables = (await env.t.q<{ name: string }>(`SELECT relname AS name FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND relname <> 'stepd_migrations'`, [env.t.schema])).map((r) => r.name);
    for (const statement of grantStatements(env.t.schema, tables)) await env.t.db.query(statement);
    expect(await env.t.q(`SELECT has_table_privilege($1, $2, 'DELETE') AS w, has_table_privilege($1, $3, 'DELETE') AS s`, [env.client.role, `${env.t.schema}.workflows`, `${env.t.schema}.schedules`])).toEqual([{ w: false, s: false }]);
  });

  it("while the client holds ROW EXCLUSIVE on every table it can write (the most it can), another role's one-step workflow completes within a second", async () => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const gate = await clientInsert(env.client, GATE_FLOW);
    const pending = await waitForStep(env.t, gate, 'approve', 'pending');
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('held', $1)`, [JSON.stringify(ECHO_FLOW)]);
    const conn = await env.client.pool.connect();
    onCleanup(async () => conn.release(true));
    const q = (text: string, values?: unknown[]) => conn.query(text.replaceAll('stepd.', `${env.t.schema}.`), values);
    await q('BEGIN');
    await q(`INSERT INTO stepd.workflows (name, flow) VALUES ('held', $1)`, [JSON.stringify(ECHO_FLOW)]);
    await q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [pending.id]);
    await q(`INSERT INTO stepd.flows (name, flow) VALUES ('held', $1)`, [JSON.stringify(ECHO_FLOW)]);
    await q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ('held', '0 9 * * *', 'held')`);
    const { rows: locks } = await env.t.db.query(
      `SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE l.pid = (SELECT pid FROM pg_stat_activity WHERE usename = $1 AND state = 'idle in transaction' LIMIT 1)
          AND c.relnamespace = $2::regnamespace AND c.relkind = 'r' ORDER BY 1`,
      [env.client.role, env.t.schema],
    );
    expect(locks.filter((l) => l.mode === 'RowExclusiveLock').map((l) => l.relname)).toEqual(['flows', 'schedules', 'workflow_steps', 'workflows']);

    const id = await clientInsert(other, ECHO_FLOW);
    const done = await waitForWorkflow(env.t, id);
    expect(done.status).toBe('completed');
    expect(done.completed_at!.getTime() - done.created_at.getTime()).toBeLessThan(1_000);
    await q('ROLLBACK');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('the honest contract for a client role, after the DELETE grants went', () => {
  async function childOf(env: SecurityEnv, parentId: string): Promise<string> {
    return (await waitFor(async () => (await env.t.q(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [parentId]))[0], `the child of ${parentId}`)).id;
  }

  it('inserts, readies a pending step, cancels, and deletes its finished workflows through delete_workflows (steps and children go with them)', async () => {
    const env = await securityEnv();
    const c = env.client;
    const completed = await clientInsert(c, GATE_FLOW);
    const gate = await waitForStep(env.t, completed, 'approve', 'pending');
    await c.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true}' WHERE id = $1`, [gate.id]);
    const failed = await clientInsert(c, { start: 'f', steps: { f: { tool: 'core.fail', args: { message: 'no' } } } });
    const cancelled = await clientInsert(c, GATE_FLOW);
    await waitForStep(env.t, cancelled, 'approve', 'pending');
    await c.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [cancelled]);
    await c.q(`INSERT INTO stepd.flows (name, flow) VALUES ('echo-child', $1)`, [JSON.stringify(ECHO_FLOW)]);
    const parent = await clientInsert(c, { start: 'sub', steps: { sub: { workflow: { name: 'echo-child', input: {} }, done: true, output: '{{result}}' } } });
    const ids = [completed, failed, cancelled, parent];
    for (const id of ids) await waitForWorkflow(env.t, id);
    const child = await childOf(env, parent);

    // The plain DELETE is no longer the contract: refused by privilege.
    await refused(c.q(`DELETE FROM stepd.workflows WHERE id = $1`, [completed]), /permission denied/);
    const deleted = await c.q<{ id: string }>(`SELECT id FROM stepd.delete_workflows($1::bigint[]) AS id ORDER BY id`, [ids]);
    expect(deleted.map((r) => r.id)).toEqual(ids);
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE id = ANY($1::bigint[])`, [[...ids, child]])).toEqual([]);
    expect(await env.t.q(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[])`, [[...ids, child]])).toEqual([]);
    // Unknown ids are no error: nothing to delete.
    expect(await c.q(`SELECT * FROM stepd.delete_workflows(ARRAY[$1::bigint])`, [completed])).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("delete_workflows refuses a live workflow, another role's, a sub-workflow child on its own and a parent whose child lives, each with an error naming the rule; nothing is deleted", async () => {
    const env = await securityEnv();
    const c = env.client;
    const mine = await clientInsert(c, ECHO_FLOW);
    await waitForWorkflow(env.t, mine);
    const live = await clientInsert(c, GATE_FLOW);
    await waitForStep(env.t, live, 'approve', 'pending');
    const other: ClientRole = await createClientRole(env.t);
    const theirs = await clientInsert(other, ECHO_FLOW);
    await waitForWorkflow(env.t, theirs);
    await c.q(`INSERT INTO stepd.flows (name, flow) VALUES ('gated-child', $1)`, [JSON.stringify(GATE_FLOW)]);
    const parent = await clientInsert(c, { start: 'sub', steps: { sub: { workflow: { name: 'gated-child', input: {} }, done: true, output: '{{result}}' } } });
    const child = await childOf(env, parent);
    const childGate = await waitForStep(env.t, child, 'approve', 'pending');

    const del = (ids: string[]) => c.q(`SELECT * FROM stepd.delete_workflows($1::bigint[])`, [ids]);
    const liveErr = await refused(del([mine, live]), new RegExp(`workflow ${live} is running; only completed, failed or cancelled workflows can be deleted`));
    expect(liveErr.code).toBe('23514');
    const theirsErr = await refused(del([mine, theirs]), new RegExp(`workflow ${theirs} was started by role ${other.role}; role ${c.role} may delete only its own workflows`));
    expect(theirsErr.code).toBe('42501');

    // The child, finished, is still its parent's to delete.
    await c.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true}' WHERE id = $1`, [childGate.id]);
    expect((await waitForWorkflow(env.t, parent)).status).toBe('completed');
    const childErr = await refused(del([child]), new RegExp(`workflow ${child} is a sub-workflow of workflow ${parent}; it is deleted with its parent`));
    expect(childErr.code).toBe('42501');

    // A finished parent whose child still lives (as after an operator's repair): refused until the child ends.
    const parent2 = await clientInsert(c, { start: 'sub', steps: { sub: { workflow: { name: 'gated-child', input: {} }, done: true, output: '{{result}}' } } });
    const child2 = await childOf(env, parent2);
    await waitForStep(env.t, child2, 'approve', 'pending');
    await env.t.db.query(`ALTER TABLE ${pg.escapeIdentifier(env.t.schema)}.workflow_steps DISABLE TRIGGER USER`);
    await env.t.q(`UPDATE stepd.workflow_steps SET status = 'cancelled', completed_at = now() WHERE workflow_id = $1`, [parent2]);
    await env.t.db.query(`ALTER TABLE ${pg.escapeIdentifier(env.t.schema)}.workflow_steps ENABLE TRIGGER USER`);
    await env.t.db.query(`ALTER TABLE ${pg.escapeIdentifier(env.t.schema)}.workflows DISABLE TRIGGER USER`);
    await env.t.q(`UPDATE stepd.workflows SET status = 'cancelled', cancelled_at = now() WHERE id = $1`, [parent2]);
    await env.t.db.query(`ALTER TABLE ${pg.escapeIdentifier(env.t.schema)}.workflows ENABLE TRIGGER USER`);
    await refused(del([parent2]), new RegExp(`workflow ${parent2} has a sub-workflow ${child2} that is still running`));

    expect((await env.t.q(`SELECT id FROM stepd.workflows WHERE id = ANY($1::bigint[]) ORDER BY id`, [[mine, live, theirs, child, parent, parent2, child2]])).length).toBe(7);
    expect(await del([parent, mine])).toHaveLength(2);
    expect((await getWorkflow(env.t, live)).status).toBe('running');
    expect(await getSteps(env.t, theirs)).toHaveLength(1);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("remove_schedule removes the client's own schedule and refuses another role's (42501)", async () => {
    const env = await securityEnv();
    const c = env.client;
    const other = await createClientRole(env.t);
    await c.q(`INSERT INTO stepd.flows (name, flow) VALUES ('nightly-flow', $1)`, [JSON.stringify(ECHO_FLOW)]);
    await c.q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ('mine', '0 9 * * *', 'nightly-flow')`);
    await other.q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ('theirs', '0 9 * * *', 'nightly-flow')`);
    await refused(c.q(`DELETE FROM stepd.schedules WHERE name = 'mine'`), /permission denied/);
    const err = await refused(c.q(`SELECT * FROM stepd.remove_schedule('theirs')`), new RegExp(`schedule theirs belongs to role ${other.role}; role ${c.role} may not remove it`));
    expect(err.code).toBe('42501');
    expect(await c.q(`SELECT name, owner_role FROM stepd.remove_schedule('mine')`)).toEqual([{ name: 'mine', owner_role: c.role }]);
    expect(await c.q(`SELECT * FROM stepd.remove_schedule('mine')`)).toEqual([]);
    expect(await env.t.q(`SELECT name FROM stepd.schedules ORDER BY name`)).toEqual([{ name: 'theirs' }]);
  });
});
