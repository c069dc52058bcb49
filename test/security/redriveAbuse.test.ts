/**
 * Redrive (sql/0009, src/executor/transitions/redrive*.ts) from a client's side: a redrive gives failed steps
 * new attempts as the workflow's own user, so it must never turn a refusal into a run. A workflow
 * refused at admission (permission_denied) is not redriven into running; a step refused a tool
 * (permission_denied) is refused again on its new attempt, the tool never called; the stamps a
 * redrive leaves are the database's and the executor's only.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { StepdFileConfig } from '../../src/configFile.js';
import pg from 'pg';
import { OperationError } from '../../src/api/errors.js';
import { Operations } from '../../src/api/operations.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { clientInsert, createClientRole, createLoginRole, getSteps, getWorkflow, insertWorkflow, onCleanup, refused, securityEnv, startConfiguredExecutor, waitFor, waitForWorkflow } from './helpers.js';

const WHOAMI = { start: 'who', steps: { who: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };
// `restricted` may call core.* only (users' patterns add to the defaults); the bystander its probe.
const PERMS: StepdFileConfig['permissions'] = { default: ['core.*'], users: { bystander: ['probe.*'] } };

async function redrive(q: (text: string, values?: unknown[]) => Promise<unknown[]>, id: string): Promise<unknown[]> {
  return q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed' RETURNING id`, [id]);
}

describe('a redrive never turns a refusal into a run', () => {
  it('a workflow refused at admission (permission_denied) is refused again when redriven; nothing runs', async () => {
    const env = await securityEnv({ config: { permissions: PERMS, clients: {} } });
    const id = await clientInsert(env.client, WHOAMI, { user: 'admin' });
    const failed = await waitForWorkflow(env.t, id);
    expect(failed.error).toMatchObject({ code: 'permission_denied' });

    const requested = await redrive(env.client.q, id).catch((e: Error) => e);
    if (Array.isArray(requested) && requested.length === 1) {
      // The guard let the request through (the flow was pinned at admission): the executor must refuse it.
      const again = await waitFor(async () => {
        const wf = await env.t.q(`SELECT status, error, redrive_requested_at FROM stepd.workflows WHERE id = $1`, [id]);
        return wf[0].status === 'failed' && wf[0].redrive_requested_at === null ? wf[0] : undefined;
      }, 'the redrive to be decided');
      expect(again.error).toMatchObject({ code: 'redrive_refused', details: { error: { code: 'permission_denied' } } });
    } else {
      expect(String(requested)).toMatch(/redriven|admitted/);
    }
    expect(await getSteps(env.t, id)).toEqual([]);
    expect(env.probe.callsOf(id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a step refused its tool (permission_denied) is refused again on the redriven attempt; the tool is never called', async () => {
    const role = `atk_${randomBytes(5).toString('hex')}`;
    const env = await securityEnv({ clientName: role, config: { permissions: PERMS, clients: { [role]: { actAs: ['restricted'] } } } });
    const id = await clientInsert(env.client, WHOAMI, { user: 'restricted' });
    const failed = await waitForWorkflow(env.t, id);
    expect(failed.status).toBe('failed');
    expect(JSON.stringify(failed.error)).toContain('permission_denied');
    expect(await redrive(env.client.q, id)).toHaveLength(1);
    const again = await waitFor(async () => {
      const [wf] = await env.t.q(`SELECT status, error, redrives, redrive_requested_at FROM stepd.workflows WHERE id = $1`, [id]);
      return wf.status === 'failed' && wf.redrive_requested_at === null ? wf : undefined;
    }, 'the redriven workflow to fail again');
    expect(JSON.stringify(again.error)).toContain('permission_denied');
    const attempts = (await getSteps(env.t, id)).filter((s) => s.name === 'who');
    expect(attempts.map((s) => [s.status, (s.error as { code?: string } | null)?.code])).toEqual(attempts.map(() => ['failed', 'permission_denied']));
    expect(env.probe.callsOf(id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client cannot forge a redrive's stamps, nor redrive a workflow that did not fail", async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } });
    await waitForWorkflow(env.t, id);
    const c = env.client;
    await refused(c.q(`UPDATE stepd.workflows SET redrive_requested_at = now() WHERE id = $1`, [id]), /permission denied|may not be changed/);
    await refused(c.q(`UPDATE stepd.workflows SET redrives = 0 WHERE id = $1`, [id]), /permission denied|may not be changed/);
    await refused(c.q(`UPDATE stepd.workflows SET status = 'running', error = NULL WHERE id = $1`, [id]), /permission denied|must not change/);
    await refused(c.q(`INSERT INTO stepd.workflows (name, flow, input, redrive_requested_at) VALUES ('x', '{}', '{}', now())`), /permission denied|may set only/);
    // A completed workflow is not failed: no redrive.
    const done = await clientInsert(c, { start: 'a', steps: { a: { tool: 'core.echo', args: {}, done: true } } });
    expect((await waitForWorkflow(env.t, done)).status).toBe('completed');
    await refused(c.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1`, [done]), /only a failed workflow can be redriven/);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("another client role cannot redrive a victim's failed workflow; the victim's role (or a member of it) can", async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const id = await clientInsert(victim, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } });
    expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
    await refused(redrive(env.client.q, id), new RegExp(`started by role ${victim.role}; role ${env.client.role} may not redrive it`));
    const untouched = await getWorkflow(env.t, id);
    expect(untouched).toMatchObject({ status: 'failed', redrives: 0, redrive_requested_at: null });
    expect((await getSteps(env.t, id)).filter((s) => s.name === 'a')).toHaveLength(1);
    // A member of the victim's role may (as for flow versions).
    const member = await createLoginRole(env.t, victim.role, `mem_${randomBytes(5).toString('hex')}`);
    const pool = new pg.Pool({ connectionString: member.url, max: 1 });
    // The role's clean-up ends its connections: an idle one reports it as an error.
    pool.on('error', () => {});
    onCleanup(() => pool.end().catch(() => {}));
    expect((await pool.query(`UPDATE ${env.t.schema}.workflows SET status = 'running' WHERE id = $1 AND status = 'failed' RETURNING id`, [id])).rows).toHaveLength(1);
    await waitFor(async () => (await getSteps(env.t, id)).filter((s) => s.name === 'a').length === 2, 'the redriven attempt');
    await env.bystander.assertUndisturbedAndServed();
  });

  it("the operations layer (dashboard, MCP over HTTP) lets a user cancel or retry only the workflows it started, unless the operator made it an admin", async () => {
    const env = await securityEnv();
    // The daemon's HTTP pool: a trusted role, so the database cannot tell its users apart.
    const pool = createPool({ url: env.t.url, schema: env.t.schema, role: 'client', max: 2 });
    const db = createKysely(pool);
    onCleanup(() => db.destroy());
    const ops = new Operations({ pool, db, schema: env.t.schema, admins: ['ops-admin'] });
    const failing = await insertWorkflow(env.t, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } }, {}, { name: 'payment', user: 'alice' });
    expect((await waitForWorkflow(env.t, failing)).status).toBe('failed');
    const denied = await ops.retryWorkflow('mallory', { workflowId: failing }).catch((e: unknown) => e as OperationError);
    expect(denied).toBeInstanceOf(OperationError);
    expect(denied).toMatchObject({
      code: 'permission_denied',
      message: `user "mallory" may not retry workflow ${failing} (payment): it was started by user "alice"; only its own user or an admin (config api.admins) may cancel or retry it`,
    });
    expect(await getWorkflow(env.t, failing)).toMatchObject({ status: 'failed', redrive_requested_at: null });
    const cancelDenied = await ops.cancelWorkflow('mallory', { workflowId: env.bystander.id }).catch((e: unknown) => e as OperationError);
    expect(cancelDenied).toMatchObject({ code: 'permission_denied' });
    expect((await getWorkflow(env.t, env.bystander.id)).status).toBe('running');
    // Reads stay open; the owner and an admin may.
    expect((await ops.getWorkflow('mallory', { workflowId: failing })).workflow).toMatchObject({ id: failing });
    expect(await ops.retryWorkflow('alice', { workflowId: failing })).toMatchObject({ status: 'running' });
    await waitFor(async () => (await getWorkflow(env.t, failing)).status === 'failed' && (await getWorkflow(env.t, failing)).redrives === 1, 'the redrive to fail again');
    expect(await ops.retryWorkflow('ops-admin', { workflowId: failing })).toMatchObject({ status: 'running' });
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a redrive checks clients.actAs again: after the operator narrows a role's actAs, its failed workflow is not redriven as that user", async () => {
    const role = `atk_${randomBytes(5).toString('hex')}`;
    const env = await securityEnv({ clientName: role, config: { clients: { [role]: { actAs: ['billing'] } } } });
    const id = await clientInsert(env.client, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } }, { user: 'billing' });
    expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
    // The operator takes `billing` away from the role: a new executor with the narrowed config.
    await env.executor.stop({ graceMs: 0 });
    await startConfiguredExecutor(env.t, { clients: { [role]: { actAs: [] } } }, { providers: [env.probe] });
    expect(await redrive(env.client.q, id)).toHaveLength(1);
    const again = await waitFor(async () => {
      const [wf] = await env.t.q(`SELECT status, error, redrives, redrive_requested_at FROM stepd.workflows WHERE id = $1`, [id]);
      return wf.status === 'failed' && wf.redrive_requested_at === null ? wf : undefined;
    }, 'the redrive to be decided');
    expect(again.error).toMatchObject({ code: 'redrive_refused', details: { reason: 'permission_denied', role, user: 'billing' } });
    expect(again.redrives).toBe(0);
    expect((await getSteps(env.t, id)).filter((s) => s.name === 'a')).toHaveLength(1);
    await env.bystander.assertUndisturbedAndServed();
  });
});
