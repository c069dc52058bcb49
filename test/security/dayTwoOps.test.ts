/**
 * Attack tests of fork_workflow (sql/0031), bulk cancel/retry by filter and prune
 * (src/db/queries/bulk.ts, retention.ts) with real LOGIN roles: a role granted the client role
 * acts only on the workflows its own role started; a role with no grants on nothing; and the
 * daemon's shared role (the dashboard, /mcp) narrows to the user's own workflows unless admin.
 * A bystander of another role waits at its gate throughout and must come out untouched.
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { createKysely, createPool } from '../../src/db/connect.js';
import { runBulkAction } from '../../src/api/bulkActions.js';
import { Operations } from '../../src/api/operations.js';
import { OperationError } from '../../src/api/errors.js';
import { deleteSignalsPastRetention } from '../../src/db/queries/retention.js';
import { pruneOnce } from '../../src/retention/prune.js';
import { clientInsert, createClientRole, createLoginRole, getSteps, getWorkflow, insertWorkflow, onCleanup, refused, securityEnv, waitFor, waitForStep, waitForWorkflow, type SecurityEnv } from './helpers.js';

const ECHO = { start: 'a', steps: { a: { tool: 'core.echo', args: { v: 1 }, next: 'b' }, b: { tool: 'core.echo', args: { got: '{{steps.a.result.v}}' }, done: true, output: '{{result}}' } } };
const GATED = { start: 'approve', steps: { approve: { approval: true, next: 'after' }, after: { tool: 'core.echo', args: { ok: '{{steps.approve.result.approved}}' }, done: true, output: '{{result}}' } } };
const FAILS = { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } };

/** A pool of `url` with search_path on the test schema, as the CLI connects. */
function poolAs(env: SecurityEnv, url: string): pg.Pool {
  const pool = createPool({ url, schema: env.t.schema, role: 'client', max: 2 });
  onCleanup(() => pool.end().catch(() => {}));
  return pool;
}

/** The operations as the daemon's HTTP side runs them: one trusted role for every user, `ops-admin` an admin. */
function sharedRoleOperations(env: SecurityEnv): Operations {
  const pool = createPool({ url: env.t.url, schema: env.t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  return new Operations({ pool, db, schema: env.t.schema, admins: ['ops-admin'] });
}

async function noGrants(env: SecurityEnv) {
  const { url } = await createLoginRole(env.t, null, `nogrant_${env.client.role}`);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  return (text: string, values?: unknown[]) => pool.query(text.replaceAll('stepd.', `${env.t.schema}.`), values);
}

describe('fork_workflow: who may fork what', () => {
  it("a client forks only its own workflows: another role's (the bystander's) is refused, nothing is inserted; a role with no grants may not call it", async () => {
    const env = await securityEnv();
    const before = (await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflows`))[0].n;
    await refused(env.client.q(`SELECT stepd.fork_workflow($1, 'approve', NULL, NULL)`, [env.bystander.id]), /may fork only its own workflows/);
    await refused(env.client.q(`SELECT stepd.fork_workflow($1)`, [env.bystander.id]), /may fork only its own workflows/);
    const none = await noGrants(env);
    await refused(none(`SELECT stepd.fork_workflow($1)`, [env.bystander.id]), /permission denied/);
    expect((await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflows`))[0].n).toBe(before);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client may not replace a gate's answer in a fork (its approvers' word), nor write forked_from / fork_step itself", async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATED);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true, "limit": 10}' WHERE id = $1`, [gate.id]);
    await waitForWorkflow(env.t, id);
    await refused(env.client.q(`SELECT stepd.fork_workflow($1, 'after', NULL, '{"approve": {"approved": true, "limit": 1000000}}')`, [id]), /readied from outside/);
    // Forking from the gate itself is fine: it asks again.
    const [{ id: forked }] = await env.client.q(`SELECT stepd.fork_workflow($1, 'approve')::text AS id`, [id]);
    await waitForStep(env.t, forked, 'approve', 'pending');
    await refused(env.client.q(`INSERT INTO stepd.workflows (name, flow, input, forked_from, fork_step) VALUES ('x', $1, '{}', $2, 'after')`, [JSON.stringify(GATED), id]), /permission denied/);
    await refused(env.client.q(`UPDATE stepd.workflows SET fork_step = 'after' WHERE id = $1`, [forked]), /permission denied/);
    await refused(env.client.q(`UPDATE stepd.workflows SET forked_from = NULL WHERE id = $1`, [forked]), /permission denied/);
    expect(await getWorkflow(env.t, forked)).toMatchObject({ forked_from: id, fork_step: 'approve', status: 'running' });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a sub-workflow is never forked on its own; results over the cap are refused before anything is written', async () => {
    const env = await securityEnv();
    const childName = `child_${env.client.role}`;
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2)`, [childName, JSON.stringify(GATED)]);
    const parent = await clientInsert(env.client, { start: 'sub', steps: { sub: { workflow: { name: childName }, done: true } } });
    const child = await waitFor(async () => (await env.t.q(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [parent]))[0]?.id as string | undefined, 'the child');
    await refused(env.client.q(`SELECT stepd.fork_workflow($1)`, [child]), /sub-workflow of workflow/);
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [parent]);

    const own = await clientInsert(env.client, ECHO);
    await waitForWorkflow(env.t, own);
    await env.t.q(`UPDATE stepd.size_caps SET result_bytes = 1000`);
    const big = JSON.stringify({ a: { blob: 'x'.repeat(20_000) } });
    const err = await env.client.q(`SELECT stepd.fork_workflow($1, 'b', NULL, $2)`, [own, big]).catch((e: { code: string; message: string }) => e);
    expect(err).toMatchObject({ code: '54000' });
    expect((await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflows WHERE forked_from = $1`, [own]))[0].n).toBe(0);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("through the daemon's shared role: a user forks only its own workflows (admins any), and replaces a gate's answer only as its approver", async () => {
    const env = await securityEnv();
    const ops = sharedRoleOperations(env);
    const gated = { start: 'approve', steps: { approve: { approval: { approvers: ['carol'] }, next: 'after' }, after: GATED.steps.after } };
    const id = await insertWorkflow(env.t, gated, {}, { user: 'alice' });
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    await env.t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false}', readied_by = 'carol' WHERE id = $1`, [gate.id]);
    await waitForWorkflow(env.t, id);

    const bob = await ops.forkWorkflow('bob', { workflowId: id }).catch((e: OperationError) => e);
    expect(bob).toMatchObject({ code: 'permission_denied' });
    const forged = await ops.forkWorkflow('alice', { workflowId: id, fromStep: 'after', results: { approve: { approved: true } } }).catch((e: OperationError) => e);
    expect(forged).toMatchObject({ code: 'permission_denied' });
    expect((forged as Error).message).toMatch(/approvers are carol/);
    const admin = await ops.forkWorkflow('ops-admin', { workflowId: id, fromStep: 'approve' });
    await waitForStep(env.t, admin.workflowId, 'approve', 'pending');
    expect((await getWorkflow(env.t, admin.workflowId)).created_by).toBe('alice');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('bulk cancel and retry by filter', () => {
  it("a client's bulk cancel and retry touch only its own role's workflows; its dry run lists only those; a role with no grants is refused", async () => {
    const env = await securityEnv();
    const pool = poolAs(env, env.client.url);
    // The bystander is named "bystander"; the attack filters on its name, its user, and nothing narrower.
    for (const filter of [{ name: 'bystander' }, { user: 'bystander' }, { since: new Date(0) }]) {
      expect((await runBulkAction(pool, 'cancel', { ...filter, limit: 100 }, true)).workflows).toEqual([]);
      expect((await runBulkAction(pool, 'cancel', { ...filter, limit: 100 }, false)).workflows).toEqual([]);
    }
    const theirs = await insertWorkflow(env.t, FAILS, {}, { name: 'flaky' });
    const mine = await clientInsert(env.client, FAILS, { name: 'flaky' });
    await waitForWorkflow(env.t, theirs);
    await waitForWorkflow(env.t, mine);
    const retried = await runBulkAction(pool, 'retry', { name: 'flaky', limit: 100 }, false);
    expect(retried.workflows.map((w) => w.workflowId)).toEqual([mine]);
    await waitFor(async () => (await getWorkflow(env.t, mine)).redrives === 1, 'the redrive');
    expect((await getWorkflow(env.t, theirs)).redrives).toBe(0);

    const none = await noGrants(env);
    await refused(none(`UPDATE stepd.workflows SET status = 'cancelled' WHERE name = 'bystander'`), /permission denied/);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("through the daemon's shared role: a user's bulk action is narrowed to its own workflows; naming another user is refused", async () => {
    const env = await securityEnv();
    const ops = sharedRoleOperations(env);
    const alice = await insertWorkflow(env.t, GATED, {}, { name: 'job', user: 'alice' });
    const bob = await insertWorkflow(env.t, GATED, {}, { name: 'job', user: 'bob' });
    await waitForStep(env.t, alice, 'approve', 'pending');
    await waitForStep(env.t, bob, 'approve', 'pending');
    await expect(ops.bulkWorkflows('bob', { action: 'cancel', user: 'alice' })).rejects.toMatchObject({ code: 'permission_denied' });
    await expect(ops.bulkWorkflows('bob', { action: 'cancel' })).rejects.toMatchObject({ code: 'invalid_input' });
    const dry = await ops.bulkWorkflows('bob', { action: 'cancel', name: 'job', dryRun: true });
    expect(dry.workflows.map((w) => w.workflowId)).toEqual([bob]);
    const done = await ops.bulkWorkflows('bob', { action: 'cancel', name: 'job' });
    expect(done.workflows.map((w) => w.workflowId)).toEqual([bob]);
    expect((await getWorkflow(env.t, alice)).status).toBe('running');
    // bystander's name is "bystander": an admin's filter reaches it, bob's never did.
    expect((await ops.bulkWorkflows('bob', { action: 'cancel', name: 'bystander', dryRun: true })).workflows).toEqual([]);
    expect((await ops.bulkWorkflows('ops-admin', { action: 'cancel', name: 'bystander', dryRun: true })).workflows.map((w) => w.workflowId)).toEqual([env.bystander.id]);
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('prune', () => {
  it("a client prunes only its own finished workflows; never a live one, never another role's, never signals; a role with no grants nothing", async () => {
    const env = await securityEnv();
    const pool = poolAs(env, env.client.url);
    const theirs = await insertWorkflow(env.t, ECHO, {}, { name: 'report' });
    const mine = await clientInsert(env.client, ECHO, { name: 'report' });
    const live = await clientInsert(env.client, GATED, { name: 'report' });
    await waitForWorkflow(env.t, theirs);
    await waitForWorkflow(env.t, mine);
    await waitForStep(env.t, live, 'approve', 'pending');
    await env.t.q(`INSERT INTO stepd.signals (name) VALUES ('old.news')`);

    const r = await pruneOnce(pool, { completed: 0, failed: 0, cancelled: 0 });
    expect(r.workflows).toEqual({ completed: 1, failed: 0, cancelled: 0 });
    const left = (await env.t.q<{ id: string }>(`SELECT id FROM stepd.workflows ORDER BY id`)).map((x) => x.id);
    expect(left).toEqual(expect.arrayContaining([env.bystander.id, theirs, live]));
    expect(left).not.toContain(mine);
    expect(await getSteps(env.t, mine)).toEqual([]);
    await refused(deleteSignalsPastRetention(pool, 0, 10), /permission denied|signals are removed only by retention/);
    expect((await env.t.q(`SELECT count(*)::int AS n FROM stepd.signals`))[0].n).toBe(1);

    const none = await noGrants(env);
    await refused(none(`SELECT stepd.delete_workflows(ARRAY[$1::bigint])`, [theirs]), /permission denied/);
    expect((await getWorkflow(env.t, theirs)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });
});
