/**
 * A `new` workflow may be edited before admission (name, flow, flow_version, input, created_by,
 * key, start_at) — by the role that wrote it (created_role, or a member of that role), never by
 * another client, and never when it is a sub-workflow's child: a child runs what its parent's step
 * named, for the parent, and rewriting one waiting to be admitted made another service's parents
 * complete with the writer's output. Trusted roles (superusers, executor members, the owner) keep
 * every right. The workflows here start tomorrow, so they stay `new` beside a running executor.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { asExecutor } from '../helpers/db.js';
import { createClientRole, createLoginRole, getWorkflow, refused, securityEnv, type ClientRole, type SecurityEnv } from './helpers.js';

const FLOW = { start: 'a', steps: { a: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };
const EVIL_FLOW = { start: 'a', steps: { a: { tool: 'core.echo', args: { forged: true }, done: true, output: '{{result}}' } } };

/** A top-level workflow of `role`, starting tomorrow. */
async function insertLater(role: ClientRole, input: unknown = { n: 1 }): Promise<string> {
  const [row] = await role.q<{ id: string }>(
    `INSERT INTO stepd.workflows (name, flow, input, created_by, start_at) VALUES ('later', $1, $2, $3, now() + interval '1 day') RETURNING id`,
    [JSON.stringify(FLOW), JSON.stringify(input), role.role],
  );
  return row!.id;
}

/** A child of `parentId` as the executor inserts one (the parent's created_by and created_role), still waiting to be admitted. */
async function insertChild(env: SecurityEnv, parentId: string): Promise<string> {
  const [row] = await asExecutor<{ id: string }>(
    env.t,
    `INSERT INTO stepd.workflows (name, flow, input, created_by, created_role, parent_id, parent_step_id, depth, start_at)
     SELECT 'child', $2, '{"n": 1}', created_by, created_role, id, 1, 1, now() + interval '1 day' FROM stepd.workflows WHERE id = $1
     RETURNING id`,
    [parentId, JSON.stringify(FLOW)],
  );
  return row!.id;
}

const EDITS: [column: string, sql: string, value: unknown][] = [
  ['flow', 'flow = $2', JSON.stringify(EVIL_FLOW)],
  ['input', 'input = $2', JSON.stringify({ n: 2 })],
  ['created_by', 'created_by = $2', 'someone-else'],
  ['key', 'key = $2', 'taken'],
  ['start_at', 'start_at = $2', new Date(Date.now() + 60_000)],
  ['name', 'name = $2', 'renamed'],
  ['flow_version', 'flow_version = $2::int', 1],
];

const snapshot = async (env: SecurityEnv, id: string) => {
  const w = await getWorkflow(env.t, id);
  return { name: w.name, flow: w.flow, input: w.input, created_by: w.created_by, key: w.key, created_role: w.created_role, status: w.status };
};

describe("a client edits only its own new workflows, never a sub-workflow's child", () => {
  it("the sample: rewriting a child's flow or input while it waits to be admitted is refused (42501) — another service's child and its own parent's", async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const theirs = await insertChild(env, await insertLater(victim));
    const own = await insertChild(env, await insertLater(env.client));
    for (const child of [theirs, own]) {
      const before = await snapshot(env, child);
      for (const [column, set, value] of EDITS.filter(([c]) => ['flow', 'input', 'name'].includes(c))) {
        const err = await refused(env.client.q(`UPDATE stepd.workflows SET ${set} WHERE id = $1`, [child, value]), /is a sub-workflow of workflow \d+; a sub-workflow is never edited from outside the executor/);
        expect([column, err.code]).toEqual([column, '42501']);
      }
      expect(await snapshot(env, child)).toEqual(before);
    }
    await env.bystander.assertUndisturbedAndServed();
  });

  it("variants: each editable column of another role's new top-level workflow is refused (42501) naming the rule; nothing changes", async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const id = await insertLater(victim);
    const before = await snapshot(env, id);
    const rule = new RegExp(`workflow ${id} was written by role ${victim.role}; role ${env.client.role} may edit only its own new workflows`);
    for (const [column, set, value] of EDITS) {
      const err = await refused(env.client.q(`UPDATE stepd.workflows SET ${set} WHERE id = $1`, [id, value]), rule);
      expect([column, err.code]).toEqual([column, '42501']);
    }
    // Several columns at once, in one statement over many rows: refused as a whole.
    await refused(env.client.q(`UPDATE stepd.workflows SET flow = $1, input = '{}' WHERE status = 'new'`, [JSON.stringify(EVIL_FLOW)]), rule);
    expect(await snapshot(env, id)).toEqual(before);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a client still edits its own new workflow (every editable column), and so does a member of its role; trusted roles edit any, children included', async () => {
    const env = await securityEnv();
    await env.t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('later', $1)`, [JSON.stringify(FLOW)]);
    const id = await insertLater(env.client);
    for (const [column, set, value] of EDITS) {
      const rows = await env.client.q(`UPDATE stepd.workflows SET ${set} WHERE id = $1 RETURNING id`, [id, value]);
      expect([column, rows.length]).toEqual([column, 1]);
    }
    expect(await snapshot(env, id)).toMatchObject({ name: 'renamed', flow: EVIL_FLOW, input: { n: 2 }, created_by: 'someone-else', key: 'taken', created_role: env.client.role });

    // A login of the same service (a member of the writing role) edits it too, and answers for it from then on.
    const colleague = await createLoginRole(env.t, env.client.role, `${env.client.role}_b`);
    const pool = new pg.Pool({ connectionString: colleague.url, max: 1 });
    try {
      await pool.query(`UPDATE ${env.t.schema}.workflows SET input = '{"n": 3}' WHERE id = $1`, [id]);
    } finally {
      await pool.end();
    }
    expect(await snapshot(env, id)).toMatchObject({ input: { n: 3 }, created_role: colleague.role });

    // The superuser (trusted, writing through the guard without the executor marker) keeps today's rights.
    const child = await insertChild(env, id);
    await env.t.q(`UPDATE stepd.workflows SET input = '{"n": 4}' WHERE id = ANY($1::bigint[])`, [[id, child]]);
    expect((await snapshot(env, child)).input).toEqual({ n: 4 });

    // Cancel is the tenant's (sql/0038): the superuser wrote it last, so it answers for it now and
    // the client may no longer cancel it; the superuser may.
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]), /may cancel only/);
    await env.t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    expect((await getWorkflow(env.t, id)).status).toBe('cancelled');
    await env.bystander.assertUndisturbedAndServed();
  });
});
