/**
 * Schedules across services (sql/0015): a schedule belongs to the role that first added it
 * (`owner_role`); another client role can neither change nor remove it, and cannot take the
 * scheduler's idempotency keys (`schedule:NAME:<tick>`) to suppress a tick. These are the
 * database's rules, so they hold for plain SQL as for `stepd schedule`.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientInsert, createClientRole, refused, securityEnv, type ClientRole } from './helpers.js';

const ECHO = { start: 'a', steps: { a: { tool: 'core.echo', args: { x: 1 }, done: true, output: '{{result}}' } } };

async function addSchedule(role: ClientRole, name: string, flow: string): Promise<void> {
  await role.q(`INSERT INTO stepd.schedules (name, cron, flow, input, created_by) VALUES ($1, '0 9 * * *', $2, '{"n": 1}', NULL)`, [name, flow]);
}

describe('a schedule belongs to the role that added it', () => {
  it('another client role can neither change nor remove it, by plain UPDATE, remove_schedule, DELETE or an upsert', async () => {
    const env = await securityEnv();
    const alice = await createClientRole(env.t, { name: `alice_${randomBytes(4).toString('hex')}` });
    await alice.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(ECHO)]);
    await addSchedule(alice, 'nightly', 'report');
    const c = env.client;
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('mine', $1)`, [JSON.stringify(ECHO)]);

    const err = await refused(c.q(`UPDATE stepd.schedules SET flow = 'mine', created_by = $1 WHERE name = 'nightly'`, [c.role]), /schedule nightly belongs to role/);
    expect(err.code).toBe('42501');
    await refused(c.q(`UPDATE stepd.schedules SET cron = '* * * * *' WHERE name = 'nightly'`), /belongs to role/);
    await refused(c.q(`SELECT * FROM stepd.remove_schedule('nightly')`), /may not remove it/);
    await refused(c.q(`DELETE FROM stepd.schedules WHERE name = 'nightly'`), /permission denied/);
    await refused(
      c.q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ('nightly', '* * * * *', 'mine')
           ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, flow = EXCLUDED.flow`),
      /belongs to role/,
    );
    await refused(c.q(`UPDATE stepd.schedules SET owner_role = $1 WHERE name = 'nightly'`, [c.role]), /permission denied/);
    await refused(c.q(`INSERT INTO stepd.schedules (name, cron, flow, owner_role) VALUES ('x', '0 9 * * *', 'mine', $1)`, [alice.role]), /permission denied/);
    expect(await env.t.q(`SELECT name, cron, flow, input, created_role, owner_role FROM stepd.schedules`)).toEqual([
      { name: 'nightly', cron: '0 9 * * *', flow: 'report', input: { n: 1 }, created_role: alice.role, owner_role: alice.role },
    ]);

    // The owner may; a trusted role may, and the schedule stays the owner's.
    await alice.q(`UPDATE stepd.schedules SET cron = '0 10 * * *' WHERE name = 'nightly'`);
    await env.t.q(`UPDATE stepd.schedules SET cron = '0 11 * * *' WHERE name = 'nightly'`);
    const [row] = await env.t.q(`SELECT cron, created_role, owner_role FROM stepd.schedules WHERE name = 'nightly'`);
    expect(row).toEqual({ cron: '0 11 * * *', created_role: 'postgres', owner_role: alice.role });
    await alice.q(`SELECT * FROM stepd.remove_schedule('nightly')`);
    expect(await env.t.q(`SELECT name FROM stepd.schedules`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client cannot take a tick's idempotency key (which would suppress that tick), by insert or by editing a new workflow", async () => {
    const env = await securityEnv();
    const tickKey = `schedule:nightly:${new Date(Date.UTC(2030, 0, 1, 9)).toISOString()}`;
    await refused(
      env.client.q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', $1, '{}', $2)`, [JSON.stringify(ECHO), tickKey]),
      /keys starting with 'schedule:' are the scheduler's/,
    );
    await env.client.session(async (q) => {
      await q(`SET stepd.executor = 'on'`);
      await refused(q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', $1, '{}', $2)`, [JSON.stringify(ECHO), tickKey]), /scheduler's/);
    });
    const later = await env.client.q<{ id: string }>(
      `INSERT INTO stepd.workflows (name, flow, input, key, start_at) VALUES ('x', $1, '{}', 'mine-1', now() + interval '1 day') RETURNING id`,
      [JSON.stringify(ECHO)],
    );
    await refused(env.client.q(`UPDATE stepd.workflows SET key = $2 WHERE id = $1`, [later[0]!.id, tickKey]), /scheduler's/);
    // Keys of its own still work, and the superuser's CLI writes are guarded the same way.
    await clientInsert(env.client, ECHO);
    await refused(env.t.q(`INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('x', $1, '{}', $2)`, [JSON.stringify(ECHO), tickKey]), /scheduler's/);
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE key LIKE 'schedule:%'`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});
