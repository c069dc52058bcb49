/**
 * Signal triggers across roles (sql/0026): a trigger starts its workflow in the signal's
 * transaction, answered for by the role that wrote the trigger, as --user or else as the
 * signal's writer; admission (clients.actAs) decides whether the trigger's writer may act as
 * that user. So no client can start a flow as a user it may not act as through a trigger —
 * neither with --user, nor by hanging its own flow on another role's signals — and no client
 * can change or remove another role's trigger, or take a 'signal:' idempotency key.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  createClientRole,
  createLoginRole,
  getSteps,
  refused,
  securityEnv,
  onCleanup,
  waitForWorkflow,
  type ClientRole,
  type SecurityEnv,
} from './helpers.js';

const WHOAMI = { start: 'who', steps: { who: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };

const roleName = (prefix: string) => `${prefix}_${randomBytes(4).toString('hex')}`;

async function sendSignal(role: ClientRole, name: string, payload: unknown = {}): Promise<string> {
  const [row] = await role.q<{ id: string }>(`INSERT INTO stepd.signals (name, key, payload) VALUES ($1, 'k-1', $2) RETURNING id::text`, [name, JSON.stringify(payload)]);
  return row!.id;
}

/** The one workflow trigger `trigger` started for signal `signalId`, once it has ended. */
async function triggered(env: SecurityEnv, trigger: string, signalId: string) {
  const [row] = await env.t.q<{ id: string }>(`SELECT id FROM stepd.workflows WHERE key = $1`, [`signal:${trigger}:${signalId}`]);
  expect(row, `no workflow for trigger ${trigger} and signal ${signalId}`).toBeDefined();
  return waitForWorkflow(env.t, row!.id);
}

describe('who a triggered workflow runs as', () => {
  it('the sample: a client trigger with --user it may not act as fails permission_denied before any step runs', async () => {
    const env = await securityEnv();
    const c = env.client;
    await c.q(`INSERT INTO stepd.flows (name, flow) VALUES ('who', $1)`, [JSON.stringify(WHOAMI)]);
    await c.q(`INSERT INTO stepd.triggers (name, signal, flow, run_as) VALUES ('as-admin', 'go', 'who', 'admin')`);
    const id = await sendSignal(c, 'go');
    const wf = await triggered(env, 'as-admin', id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'permission_denied', details: { role: c.role, user: 'admin' } });
    expect(await getSteps(env.t, wf.id)).toEqual([]);
    expect(env.probe.callsOf(wf.id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("variant: a client's trigger on another role's signals does not run as that role unless clients.actAs lets the trigger's writer act as it", async () => {
    const sender = roleName('payments');
    const allowed = roleName('ops');
    const env = await securityEnv({ config: { clients: { [allowed]: { actAs: [sender] } } } });
    const payments = await createClientRole(env.t, { name: sender });
    const ops = await createClientRole(env.t, { name: allowed });
    const c = env.client;
    await c.q(`INSERT INTO stepd.flows (name, flow) VALUES ('who', $1)`, [JSON.stringify(WHOAMI)]);
    // The attacker hangs its own flow on the payment service's signal, without --user.
    await c.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('steal', 'payment.received', 'who')`);
    // A role the config lets act as the sender, and an operator (trusted), do the same.
    await ops.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('ops', 'payment.received', 'who')`);
    await env.t.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('operator', 'payment.received', 'who')`);

    const id = await sendSignal(payments, 'payment.received', { amount: 12 });
    const stolen = await triggered(env, 'steal', id);
    expect(stolen.status).toBe('failed');
    expect(stolen.error).toMatchObject({ code: 'permission_denied', details: { role: c.role, user: sender } });
    expect(await getSteps(env.t, stolen.id)).toEqual([]);
    // Under the rules of the trigger's writer, the signal's writer is who the workflow runs as.
    for (const trigger of ['ops', 'operator']) {
      const wf = await triggered(env, trigger, id);
      expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
      expect(wf.output).toEqual({ user: sender });
      expect(wf.input).toEqual({ amount: 12 });
    }
    expect((await env.t.q(`SELECT key, created_role, created_by FROM stepd.workflows WHERE key LIKE 'signal:%' ORDER BY key`))).toEqual([
      { key: `signal:operator:${id}`, created_role: 'postgres', created_by: sender },
      { key: `signal:ops:${id}`, created_role: allowed, created_by: sender },
      { key: `signal:steal:${id}`, created_role: c.role, created_by: sender },
    ]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('variant: --user runs as that user when the trigger writer may act as it, whoever sends the signal', async () => {
    const writer = roleName('ops');
    const env = await securityEnv({ config: { clients: { [writer]: { actAs: ['bot-*'] } } } });
    const ops = await createClientRole(env.t, { name: writer });
    await ops.q(`INSERT INTO stepd.flows (name, flow) VALUES ('who', $1)`, [JSON.stringify(WHOAMI)]);
    await ops.q(`INSERT INTO stepd.triggers (name, signal, flow, run_as) VALUES ('bot', 'go', 'who', 'bot-7')`);
    const id = await sendSignal(env.client, 'go');
    const wf = await triggered(env, 'bot', id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ user: 'bot-7' });
    // The attacker cannot re-point that trigger at a user of its choosing.
    await refused(env.client.q(`UPDATE stepd.triggers SET run_as = 'admin' WHERE name = 'bot'`), /trigger bot belongs to role/);
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('a trigger belongs to the role that added it', () => {
  it('another client role can neither change nor remove it, by UPDATE, upsert, remove_trigger or DELETE, nor forge its stamps', async () => {
    const env = await securityEnv();
    const alice = await createClientRole(env.t, { name: roleName('alice') });
    await alice.q(`INSERT INTO stepd.flows (name, flow) VALUES ('who', $1)`, [JSON.stringify(WHOAMI)]);
    await alice.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('paid', 'payment.received', 'who')`);
    const c = env.client;
    const err = await refused(c.q(`UPDATE stepd.triggers SET flow = 'who', run_as = $1 WHERE name = 'paid'`, [c.role]), /trigger paid belongs to role/);
    expect(err.code).toBe('42501');
    await refused(c.q(`UPDATE stepd.triggers SET input = '{"x": 1}' WHERE name = 'paid'`), /may not change it/);
    await refused(
      c.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('paid', 'other', 'who') ON CONFLICT (name) DO UPDATE SET signal = EXCLUDED.signal`),
      /belongs to role/,
    );
    await refused(c.q(`SELECT * FROM stepd.remove_trigger('paid')`), /may not remove it/);
    await refused(c.q(`DELETE FROM stepd.triggers WHERE name = 'paid'`), /permission denied/);
    await refused(c.q(`TRUNCATE stepd.triggers`), /permission denied/);
    await refused(c.q(`UPDATE stepd.triggers SET owner_role = $1 WHERE name = 'paid'`, [c.role]), /permission denied/);
    await refused(c.q(`INSERT INTO stepd.triggers (name, signal, flow, created_role) VALUES ('x', 'y', 'who', $1)`, [alice.role]), /permission denied/);
    // Stamps are the database's, whatever the writer sends.
    await c.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('mine', 'y', 'who')`);
    expect(await env.t.q(`SELECT name, signal, flow, input, run_as, created_role, owner_role FROM stepd.triggers ORDER BY name`)).toEqual([
      { name: 'mine', signal: 'y', flow: 'who', input: '{{signal.payload}}', run_as: null, created_role: c.role, owner_role: c.role },
      { name: 'paid', signal: 'payment.received', flow: 'who', input: '{{signal.payload}}', run_as: null, created_role: alice.role, owner_role: alice.role },
    ]);
    // The owner may; a trusted role may, and the trigger stays the owner's.
    await alice.q(`UPDATE stepd.triggers SET input = '{"n": "{{signal.id}}"}' WHERE name = 'paid'`);
    await env.t.q(`UPDATE stepd.triggers SET signal = 'payment.settled' WHERE name = 'paid'`);
    expect(await env.t.q(`SELECT signal, created_role, owner_role FROM stepd.triggers WHERE name = 'paid'`)).toEqual([
      { signal: 'payment.settled', created_role: 'postgres', owner_role: alice.role },
    ]);
    expect(await alice.q(`SELECT name FROM stepd.remove_trigger('paid')`)).toEqual([{ name: 'paid' }]);
    expect(await c.q(`SELECT name FROM stepd.remove_trigger('mine')`)).toEqual([{ name: 'mine' }]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client cannot take a triggered workflow's key (which would suppress that start), by insert, by edit, or with the executor marker", async () => {
    const env = await securityEnv();
    const c = env.client;
    await c.q(`INSERT INTO stepd.flows (name, flow) VALUES ('who', $1)`, [JSON.stringify(WHOAMI)]);
    await c.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('t', 'go', 'who')`);
    const [row] = await env.t.q<{ next: string }>(`SELECT (coalesce(max(id), 0) + 1)::text AS next FROM stepd.signals`);
    const next = row!.next;
    const key = `signal:t:${next}`;
    await refused(c.q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', $1, '{}', $2)`, [JSON.stringify(WHOAMI), key]), /keys starting with 'signal:'/);
    await c.session(async (q) => {
      await q(`SET stepd.executor = 'on'`);
      await refused(q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', $1, '{}', $2)`, [JSON.stringify(WHOAMI), key]), /signal triggers'/);
    });
    const [later] = await c.q<{ id: string }>(
      `INSERT INTO stepd.workflows (name, flow, input, key, start_at) VALUES ('x', $1, '{}', 'mine-1', now() + interval '1 day') RETURNING id`,
      [JSON.stringify(WHOAMI)],
    );
    await refused(c.q(`UPDATE stepd.workflows SET key = $2 WHERE id = $1`, [later!.id, key]), /signal triggers'/);
    await refused(env.t.q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', $1, '{}', $2)`, [JSON.stringify(WHOAMI), key]), /signal triggers'/);
    // The start the key belongs to still happens, once.
    const id = await sendSignal(c, 'go');
    expect(id).toBe(next);
    const wf = await triggered(env, 't', id);
    expect(wf.output).toEqual({ user: c.role });
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflows WHERE key LIKE 'signal:%'`)).toEqual([{ n: 1 }]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a role with no grants can neither read nor write triggers, nor call remove_trigger, nor send a signal that would start one', async () => {
    const env = await securityEnv();
    const { url } = await createLoginRole(env.t, null, roleName('nogrant'));
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    onCleanup(() => pool.end().catch(() => {}));
    const q = (text: string) => pool.query(text.replaceAll('stepd.', `${env.t.schema}.`));
    for (const statement of [
      `SELECT * FROM stepd.triggers`,
      `INSERT INTO stepd.triggers (name, signal, flow) VALUES ('x', 'y', 'z')`,
      `SELECT * FROM stepd.remove_trigger('x')`,
      `INSERT INTO stepd.signals (name) VALUES ('go')`,
    ]) {
      await refused(q(statement), /permission denied/);
    }
    await env.bystander.assertUndisturbedAndServed();
  });
});
