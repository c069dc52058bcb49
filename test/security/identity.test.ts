/**
 * Identity recorded by the database: `created_role` and `readied_role` hold the session_user
 * that wrote, and a client cannot set or rewrite them (nor any other audit column). `created_by`
 * is checked at admission against the config's `clients` section: a role without an entry acts
 * only as itself (a null created_by means its own name); a role with `actAs` patterns acts as the
 * users they match; a refused workflow fails with permission_denied before any step runs.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { StepdFileConfig } from '../../src/configFile.js';
import {
  ProbeTools,
  clientInsert,
  createClientRole,
  createSecuredSchema,
  startConfiguredExecutor,
  getSteps,
  insertWorkflow,
  refused,
  securityEnv,
  waitForStep,
  waitForWorkflow,
  type SecurityEnv,
} from './helpers.js';

const WHOAMI_FLOW = { start: 'who', steps: { who: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };
const GATE_FLOW = { start: 'approve', steps: { approve: { approval: true, next: 'who' }, who: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };

/** The workflow was refused at admission: failed, permission_denied naming role and user, no step, no tool call. */
async function expectRefusedAtAdmission(env: SecurityEnv, id: string, user: string): Promise<void> {
  const wf = await waitForWorkflow(env.t, id);
  expect(wf.status).toBe('failed');
  expect(wf.error).toMatchObject({ code: 'permission_denied' });
  expect(wf.error!.message).toContain(env.client.role);
  expect(wf.error!.message).toContain(user);
  expect(await getSteps(env.t, id)).toEqual([]);
  expect(env.probe.callsOf(id)).toEqual([]);
}

async function expectRanAs(env: SecurityEnv, id: string, user: string): Promise<void> {
  const wf = await waitForWorkflow(env.t, id);
  expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
  expect(wf.output).toEqual({ user });
  expect(env.probe.callsOf(id).map((c) => c.user)).toEqual([user]);
}

describe('the database records who wrote', () => {
  it('records the inserting role in created_role, whatever created_by says', async () => {
    const env = await securityEnv({ config: { clients: {} } });
    const id = await clientInsert(env.client, WHOAMI_FLOW, { user: 'someone-else' });
    const [row] = await env.t.q(`SELECT created_role, created_by FROM stepd.workflows WHERE id = $1`, [id]);
    expect(row).toEqual({ created_role: env.client.role, created_by: 'someone-else' });
    const [mine] = await env.t.q(`SELECT created_role FROM stepd.workflows WHERE id = $1`, [env.bystander.id]);
    expect(mine.created_role).toBe('postgres');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('records the readying role in readied_role; readied_by stays a free label', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', readied_by = 'the-boss' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    await expectRanAs(env, id, env.client.role);
    const [row] = await env.t.q(`SELECT readied_by, readied_role FROM stepd.workflow_steps WHERE id = $1`, [gate.id]);
    expect(row).toEqual({ readied_by: 'the-boss', readied_role: env.client.role });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('refuses a client that sets created_role or any executor column on insert', async () => {
    const env = await securityEnv();
    const flow = JSON.stringify(WHOAMI_FLOW);
    const rule = /permission denied|may set only name, flow, input, created_by and key/;
    await refused(env.client.q(`INSERT INTO stepd.workflows (name, flow, created_role) VALUES ('x', $1, 'postgres')`, [flow]), rule);
    await refused(env.client.q(`INSERT INTO stepd.workflows (name, flow, output) VALUES ('x', $1, '{}')`, [flow]), rule);
    await refused(env.client.q(`INSERT INTO stepd.workflows (name, flow, status) VALUES ('x', $1, 'completed')`, [flow]), /permission denied|must be inserted with status 'new'/);
    await refused(env.client.q(`INSERT INTO stepd.workflows (name, flow, started_at) VALUES ('x', $1, now())`, [flow]), rule);
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE name = 'x'`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('refuses a client that rewrites created_role, readied_role or readied_at, with or without the marker', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    for (const marker of [false, true]) {
      await env.client.session(async (run) => {
        if (marker) await run(`SET stepd.executor = 'on'`);
        await refused(run(`UPDATE stepd.workflows SET created_role = 'postgres' WHERE id = $1`, [id]), /permission denied|may not be changed|can be edited/);
        await refused(
          run(`UPDATE stepd.workflow_steps SET status = 'ready', readied_role = 'postgres' WHERE id = $1`, [gate.id]),
          /permission denied|may set only status, result and readied_by/,
        );
        await refused(
          run(`UPDATE stepd.workflow_steps SET status = 'ready', readied_at = now() - interval '1 day' WHERE id = $1`, [gate.id]),
          /permission denied|may set only status, result and readied_by/,
        );
      });
    }
    const [row] = await env.t.q(
      `SELECT w.created_role, s.status, s.readied_role, s.readied_at FROM stepd.workflows w JOIN stepd.workflow_steps s ON s.workflow_id = w.id WHERE s.id = $1`,
      [gate.id],
    );
    expect(row).toEqual({ created_role: env.client.role, status: 'pending', readied_role: null, readied_at: null });
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('created_by is checked at admission against the clients config', () => {
  const PERMS: StepdFileConfig['permissions'] = { default: ['core.*', 'probe.*'] };

  it('a role without an entry cannot start a workflow as another user', async () => {
    const env = await securityEnv({ config: { permissions: PERMS, clients: {} } });
    const id = await clientInsert(env.client, WHOAMI_FLOW, { user: 'admin' });
    await expectRefusedAtAdmission(env, id, 'admin');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a role without an entry may act as itself, and a null created_by means its own name', async () => {
    const env = await securityEnv({ config: { permissions: PERMS, clients: {} } });
    const own = await clientInsert(env.client, WHOAMI_FLOW, { user: env.client.role });
    const unnamed = await clientInsert(env.client, WHOAMI_FLOW, { user: null });
    await expectRanAs(env, own, env.client.role);
    await expectRanAs(env, unnamed, env.client.role);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a role without an entry cannot impersonate, even when no clients section is configured', async () => {
    const env = await securityEnv({ config: { permissions: PERMS } });
    const id = await clientInsert(env.client, WHOAMI_FLOW, { user: 'admin' });
    await expectRefusedAtAdmission(env, id, 'admin');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a role acts as the users its actAs patterns match, and no one else', async () => {
    const role = `atk_${randomBytes(5).toString('hex')}`;
    const env = await securityEnv({ clientName: role, config: { permissions: PERMS, clients: { [role]: { actAs: ['team-*', 'svc-bot'] } } } });
    const allowed = { teamA: await clientInsert(env.client, WHOAMI_FLOW, { user: 'team-a' }), bot: await clientInsert(env.client, WHOAMI_FLOW, { user: 'svc-bot' }) };
    const refusedUsers = ['admin', 'xteam-a', 'svc-bot2', 'postgres'];
    const denied = await Promise.all(refusedUsers.map((user) => clientInsert(env.client, WHOAMI_FLOW, { user })));
    await expectRanAs(env, allowed.teamA, 'team-a');
    await expectRanAs(env, allowed.bot, 'svc-bot');
    for (const [i, id] of denied.entries()) await expectRefusedAtAdmission(env, id, refusedUsers[i]!);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("another role's actAs entry grants this role nothing", async () => {
    const env = await securityEnv({ config: { permissions: PERMS, clients: { some_other_service: { actAs: ['*'] } } } });
    const id = await clientInsert(env.client, WHOAMI_FLOW, { user: 'admin' });
    await expectRefusedAtAdmission(env, id, 'admin');
    await env.bystander.assertUndisturbedAndServed();
  });

  it("impersonating a user with more permissions fails before that user's tools run", async () => {
    const env = await securityEnv({ config: { permissions: { default: ['core.*'], users: { admin: ['probe.*'] } }, clients: {} } });
    const id = await clientInsert(env.client, WHOAMI_FLOW, { user: 'admin' });
    await expectRefusedAtAdmission(env, id, 'admin');
    // The same flow started honestly is denied its tool by the permissions, as it should be.
    const honest = await clientInsert(env.client, WHOAMI_FLOW);
    const wf = await waitForWorkflow(env.t, honest);
    expect(wf.error).toMatchObject({ code: 'permission_denied' });
    expect(env.probe.callsOf(honest)).toEqual([]);
  });

  it('superusers (trusted services) may still start workflows as anyone: the zero-setup default', async () => {
    const env = await securityEnv({ config: { permissions: PERMS, clients: {} } });
    const id = await insertWorkflow(env.t, WHOAMI_FLOW, {}, { user: 'admin' });
    await expectRanAs(env, id, 'admin');
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client cannot edit a trusted service's queued workflow (sql/0020), so it cannot borrow that service's trust", async () => {
    const t = await createSecuredSchema();
    const client = await createClientRole(t);
    // Queued by a trusted service before any executor runs: still 'new', but not the client's to edit.
    const id = await insertWorkflow(t, WHOAMI_FLOW, {}, { user: 'report-bot' });
    await refused(client.q(`UPDATE stepd.workflows SET created_role = $2 WHERE id = $1`, [id, 'postgres']), /permission denied/);
    const err = await refused(client.q(`UPDATE stepd.workflows SET created_by = 'admin' WHERE id = $1`, [id]), /was written by role postgres; role \S+ may edit only its own new workflows/);
    expect(err.code).toBe('42501');
    const probe = new ProbeTools();
    await startConfiguredExecutor(t, { permissions: PERMS, clients: {} }, { providers: [probe] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.created_role).toBe('postgres');
    expect(probe.calls.map((c) => c.user)).toEqual(['report-bot']);
  });
});
