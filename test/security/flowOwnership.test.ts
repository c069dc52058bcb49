/**
 * The flow registry across services (sql/0015): a workflow started by name runs the latest
 * registered version as its own created_by, so a flow name belongs to the role that stored its
 * first version. Another client role cannot add versions of it (nor rewrite, delete or renumber
 * any), so it can never choose the tools another service's by-name starts run as that service's
 * user. The owner, a member of the owner's role and trusted roles can.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createClientRole, createLoginRole, getSteps, refused, securityEnv, waitForWorkflow, type ClientRole } from './helpers.js';
import pg from 'pg';
import { onCleanup } from '../helpers/db.js';

const PAY_V1 = { start: 'pay', steps: { pay: { tool: 'core.echo', args: { paid: '{{input.amount}}' }, done: true, output: '{{result}}' } } };
/** What the attacker would like the victim's by-name starts to run: a tool, as the victim's user. */
const HIJACK = { start: 'steal', steps: { steal: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };

async function putFlow(role: ClientRole, name: string, flow: unknown): Promise<number> {
  const [row] = await role.q<{ version: number }>(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2) RETURNING version`, [name, JSON.stringify(flow)]);
  return row!.version;
}

describe('a flow name belongs to the role that registered it', () => {
  it("another client role cannot add a version of a flow it did not register; the owner's by-name starts run the owner's flow", async () => {
    const env = await securityEnv({ config: { clients: {} } });
    const alice = await createClientRole(env.t, { name: `alice_${randomBytes(4).toString('hex')}` });
    expect(await putFlow(alice, 'pay', PAY_V1)).toBe(1);

    const err = await refused(putFlow(env.client, 'pay', HIJACK), /flow "pay" belongs to role/);
    expect(err.code).toBe('42501');
    expect(err.message).toContain(alice.role);
    expect(err.message).toContain(env.client.role);
    // Not with the executor marker either, nor with created_by naming the owner.
    await env.client.session(async (q) => {
      await q(`SET stepd.executor = 'on'`);
      await refused(q(`INSERT INTO stepd.flows (name, flow, created_by) VALUES ('pay', $1, $2)`, [JSON.stringify(HIJACK), alice.role]), /belongs to role/);
    });
    expect(await env.t.q(`SELECT version, created_role FROM stepd.flows WHERE name = 'pay'`)).toEqual([{ version: 1, created_role: alice.role }]);

    const [wf] = await alice.q<{ id: string }>(`INSERT INTO stepd.workflows (name, input) VALUES ('pay', '{"amount": 12}') RETURNING id`);
    const done = await waitForWorkflow(env.t, wf!.id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done).toMatchObject({ flow_version: 1, created_by: alice.role, output: { paid: 12 } });
    expect(env.probe.callsOf(wf!.id)).toEqual([]);

    // The owner goes on adding versions; the attacker registers names of its own.
    expect(await putFlow(alice, 'pay', { ...PAY_V1, description: 'v2' })).toBe(2);
    expect(await putFlow(env.client, 'mallory-pay', HIJACK)).toBe(1);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('members of the owning role and trusted roles may add versions', async () => {
    const env = await securityEnv();
    const alice = await createClientRole(env.t, { name: `alice_${randomBytes(4).toString('hex')}` });
    await putFlow(alice, 'pay', PAY_V1);

    // A login role granted alice's role (a second instance of the same service, say).
    const { url } = await createLoginRole(env.t, alice.role, `alice2_${randomBytes(4).toString('hex')}`);
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    // The cleanup drops this role, terminating its idle connection: not an error of the test.
    pool.on('error', () => {});
    onCleanup(() => pool.end());
    const v2 = await pool.query(`INSERT INTO ${env.t.schema}.flows (name, flow) VALUES ('pay', $1) RETURNING version`, [JSON.stringify({ ...PAY_V1, description: 'v2' })]);
    expect(v2.rows[0].version).toBe(2);

    // The superuser (an operator) is trusted.
    const [v3] = await env.t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('pay', $1) RETURNING version, created_role`, [JSON.stringify(PAY_V1)]);
    expect(v3).toEqual({ version: 3, created_role: 'postgres' });
    // Ownership stays with the first version's role: the attacker is still refused.
    await refused(putFlow(env.client, 'pay', HIJACK), /belongs to role/);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a name first registered by a trusted role takes versions from trusted roles only', async () => {
    const env = await securityEnv();
    await env.t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('ops', $1)`, [JSON.stringify(PAY_V1)]);
    await refused(putFlow(env.client, 'ops', HIJACK), /flow "ops" belongs to role postgres/);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('registered versions cannot be rewritten, deleted, truncated or numbered by a client', async () => {
    const env = await securityEnv();
    const alice = await createClientRole(env.t, { name: `alice_${randomBytes(4).toString('hex')}` });
    await putFlow(alice, 'pay', PAY_V1);
    const c = env.client;
    await refused(c.q(`UPDATE stepd.flows SET flow = $1 WHERE name = 'pay'`, [JSON.stringify(HIJACK)]), /immutable|permission denied/);
    await refused(alice.q(`UPDATE stepd.flows SET flow = $1 WHERE name = 'pay'`, [JSON.stringify(HIJACK)]), /immutable|permission denied/);
    await refused(c.q(`DELETE FROM stepd.flows WHERE name = 'pay'`), /permission denied/);
    await refused(alice.q(`DELETE FROM stepd.flows WHERE name = 'pay'`), /permission denied/);
    await refused(c.q(`TRUNCATE stepd.flows`), /permission denied/);
    // Columns the database sets are not the client's to give.
    await refused(c.q(`INSERT INTO stepd.flows (name, version, flow) VALUES ('mine', 7, '{}')`), /permission denied/);
    await refused(c.q(`INSERT INTO stepd.flows (name, flow, created_role) VALUES ('mine', '{}', $1)`, [alice.role]), /permission denied/);
    await refused(c.q(`INSERT INTO stepd.flows (name, flow, created_at) VALUES ('mine', '{}', now() - interval '1 year')`), /permission denied/);
    expect(await env.t.q(`SELECT name, version, created_role FROM stepd.flows ORDER BY name, version`)).toEqual([{ name: 'pay', version: 1, created_role: alice.role }]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('flow_version pins a version of the same name only: a start cannot borrow another name\'s version', async () => {
    const env = await securityEnv({ config: { clients: {} } });
    const alice = await createClientRole(env.t, { name: `alice_${randomBytes(4).toString('hex')}` });
    await putFlow(alice, 'pay', PAY_V1);
    const [row] = await env.client.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow_version, input) VALUES ('unregistered', 1, '{}') RETURNING id`);
    const wf = await waitForWorkflow(env.t, row!.id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'unknown_flow' });
    expect(wf.flow).toBeNull();
    expect(await getSteps(env.t, row!.id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});
