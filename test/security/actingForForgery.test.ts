/**
 * Attacks on "a client changes only the work its role acts for" (sql/0038), as a hostile client
 * with its own login: forging the acting-for rules, reaching the cancel and ready guards by other
 * statements (an upsert, a result-only write, SET ROLE, the executor marker), role names full of
 * pattern and quoting characters, and memberships the attacker tries to grant itself.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from '../helpers/db.js';
import { clientInsert, createClientRole, createLoginRole, onCleanup, getSteps, getWorkflow, refused, schemaRoles, securityEnv, waitForStep, waitForWorkflow, type ClientRole, type SecurityEnv } from './helpers.js';

const GATE_FLOW = { start: 'approve', steps: { approve: { approval: true, next: 'pay' }, pay: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };
const ident = pg.escapeIdentifier;

async function rowsOf(env: SecurityEnv, id: string): Promise<unknown> {
  const wf = await getWorkflow(env.t, id);
  return { status: wf.status, steps: (await getSteps(env.t, id)).map((s) => [s.name, s.status, s.result, s.readied_by]) };
}

/** A client role of any name (the helpers' URL cannot carry `%`, quotes or `\\` in a user name). */
async function namedClient(env: SecurityEnv, name: string): Promise<ClientRole> {
  await createLoginRole(env.t, schemaRoles(env.t.schema).client, name);
  const url = new URL(TEST_DATABASE_URL);
  const pool = new pg.Pool({ host: url.hostname, port: Number(url.port || 5432), database: url.pathname.slice(1), user: name, max: 2 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  const q = async (text: string, values?: unknown[]) => (await pool.query(text.replaceAll('stepd.', `${env.t.schema}.`), values)).rows;
  return { role: name, url: '', pool, q, session: async (fn) => fn(q) } as ClientRole;
}

async function victimGate(env: SecurityEnv, victim: ClientRole, user?: string): Promise<{ id: string; gate: string }> {
  const id = await clientInsert(victim, GATE_FLOW, user === undefined ? {} : { user });
  return { id, gate: (await waitForStep(env.t, id, 'approve', 'pending')).id };
}

describe('a client cannot reach another tenant’s work around the 0038 guards', () => {
  it('an upsert on the victim’s key, a result-only write to its gate, SET ROLE to the client group and the executor marker are all refused', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const key = `vic-${randomBytes(4).toString('hex')}`;
    const [keyed] = await victim.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('v', $1, '{}', $2) RETURNING id`, [JSON.stringify(GATE_FLOW), key]);
    const gate = (await waitForStep(env.t, keyed!.id, 'approve', 'pending')).id;
    const before = await rowsOf(env, keyed!.id);

    // The victim's key is readable (SELECT on workflows): an upsert that lands on its row.
    await refused(
      env.client.q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', '{}', '{}', $1) ON CONFLICT (key) DO UPDATE SET status = 'cancelled'`, [key]),
      /may cancel only|may not be changed|new workflows/,
    );
    // A result written without readying, for the victim's own approval to carry later.
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET result = '{"approved": false}' WHERE id = $1`, [gate]), /.+/);
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET readied_by = $2 WHERE id = $1`, [gate, victim.role]), /.+/);
    // SET ROLE to a role it is a member of, and the executor marker: the session is still the attacker.
    for (const prelude of [`SET ROLE ${ident(schemaRoles(env.t.schema).client)}`, `SET stepd.executor = 'on'`, `SET SESSION stepd.signal_wakeup = '1'`]) {
      await env.client.session(async (run) => {
        await run(prelude);
        await refused(run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [keyed!.id]), /may cancel only/);
        await refused(run(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate]), /may ready only/);
      });
    }
    expect(await rowsOf(env, keyed!.id)).toEqual(before);
    await victim.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate]);
    const done = await waitForWorkflow(env.t, keyed!.id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect((await getSteps(env.t, keyed!.id)).find((s) => s.name === 'approve')!.result).not.toEqual({ approved: false });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('the acting-for rules: no client reads, writes, locks or calls them', async () => {
    const env = await securityEnv({ config: { clients: {} } });
    for (const sql of [
      `INSERT INTO stepd.client_act_as (role, patterns) VALUES ('${env.client.role}', ARRAY['*'])`,
      `UPDATE stepd.client_act_as SET patterns = ARRAY['*']`,
      `DELETE FROM stepd.client_act_as`,
      `TRUNCATE stepd.client_act_as`,
      `LOCK TABLE stepd.client_act_as IN ACCESS EXCLUSIVE MODE`,
      `SELECT stepd.stepd_role_acts_for('${env.client.role}', 'postgres', NULL)`,
      `SELECT stepd.stepd_guard_cancel_owner()`,
      `SELECT stepd.stepd_guard_ready_owner()`,
    ]) {
      await env.client.session(async (run) => {
        await run('BEGIN');
        await refused(run(sql), /permission denied|must be owner|trigger functions can only be called/);
      }).catch((e: { code?: string }) => {
        // A trigger function called directly: 0A000 (feature not supported) is a refusal too.
        if (e.code !== '0A000') throw e;
      });
    }
  });

  it('role names full of pattern, path and quoting characters act only for themselves; a look-alike name gains nothing', async () => {
    const hex = randomBytes(3).toString('hex');
    // ≤ 63 bytes each (PostgreSQL cuts longer names): %, _, *, /, quotes, a backslash, unicode.
    const atk = `a%_*/"'\\ü ${hex}`.padEnd(40, 'x');
    const vic = `A%_*/"'\\ü ${hex}`.padEnd(40, 'x');
    const env = await securityEnv({ config: { clients: { [atk]: { actAs: ['%', '_', 'fin\\*'] }, [vic]: { actAs: ['*'] } } } });
    const attacker = await namedClient(env, atk);
    const victim = await namedClient(env, vic);
    const own = await clientInsert(attacker, GATE_FLOW);
    // `%` and `_` match themselves; `\` is a character, `*` after it still the wildcard.
    for (const user of ['fin_ops', '%x', 'ab', vic, atk.toUpperCase(), null]) {
      const w = await victimGate(env, victim, user ?? undefined);
      await refused(attacker.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [w.gate]), /may ready only/);
      await refused(attacker.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [w.id]), /may cancel only/);
    }
    // What its patterns do cover, as admission reads them (src/security/actAs.ts), it may act for.
    for (const user of ['%', '_', 'fin\\ops']) {
      const w = await victimGate(env, victim, user);
      await attacker.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [w.id]);
      expect((await waitForWorkflow(env.t, w.id)).status).toBe('cancelled');
    }
    // Its own: the guard finds its role by name, quotes and all.
    const ownGate = await waitForStep(env.t, own, 'approve', 'pending');
    await attacker.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [ownGate.id]);
    expect((await waitForWorkflow(env.t, own)).status).toBe('completed');
  });

  it('the attacker cannot make itself a member of the victim’s role; granting its own role away gives it nothing', async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const w = await victimGate(env, victim);
    await refused(env.client.q(`GRANT ${ident(victim.role)} TO ${ident(env.client.role)}`), /permission denied|must have admin/);
    await refused(env.client.q(`GRANT ${ident(schemaRoles(env.t.schema).executor)} TO ${ident(env.client.role)}`), /permission denied|must have admin/);
    await refused(env.client.q(`ALTER ROLE ${ident(env.client.role)} SUPERUSER`), /permission denied|must be superuser/);
    // PostgreSQL 15 lets a session grant its own role (the victim then acts for the attacker, not the reverse).
    await env.client.q(`GRANT ${ident(env.client.role)} TO ${ident(victim.role)}`).catch(() => {});
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [w.id]), /may cancel only/);
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [w.gate]), /may ready only/);
    expect((await getWorkflow(env.t, w.id)).status).toBe('running');
  });
});
