/**
 * Priority and capacity are attack surface (sql/0028): a client sets `priority` at insert only,
 * lowered to its role's `clients.ROLE.maxPriority` (0 without one); nobody raises a priority
 * afterwards, its own or another's; the keys, holds and gates the executor writes cannot be set
 * or changed from outside, even by a role a DBA over-granted; capacity_verdicts is the
 * executor's (and workers') only. Real LOGIN roles: a client and a role with no grants.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createClientRole, createLoginRole, getWorkflow, refused, securityEnv, waitForWorkflow } from './helpers.js';

const FLOW = { start: 'a', steps: { a: { tool: 'core.noop', done: true } } };
const LATER = `now() + interval '1 day'`;

async function insertWithPriority(q: (text: string, values?: unknown[]) => Promise<{ id: string }[]>, priority: number, later = true): Promise<string> {
  const [row] = await q(
    `INSERT INTO stepd.workflows (name, flow, input, priority${later ? ', start_at' : ''}) VALUES ('p', $1, '{}', $2${later ? `, ${LATER}` : ''}) RETURNING id`,
    [JSON.stringify(FLOW), priority],
  );
  return row!.id;
}

describe('priority is capped per role and never raised afterwards', () => {
  it('a role above its maxPriority gets its cap; a role without one gets 0; the executor writes the caps from the config', async () => {
    const env = await securityEnv({ clientName: `cap_${Date.now().toString(36)}`, config: {} });
    const other = await createClientRole(env.t);
    // The caps come from the config of the executor that started last: write them as a restart would.
    await env.t.q(`INSERT INTO stepd.priority_caps (role, max_priority) VALUES ($1, 3)`, [env.client.role]);
    const capped = await insertWithPriority(env.client.q, 10);
    const within = await insertWithPriority(env.client.q, 2);
    const uncapped = await insertWithPriority(other.q, 5);
    expect((await getWorkflow(env.t, capped)).priority).toBe(3);
    expect((await getWorkflow(env.t, within)).priority).toBe(2);
    expect((await getWorkflow(env.t, uncapped)).priority).toBe(0);
    // Below 0 is refused by name (0 is the lowest: batch work stays at 0).
    await expect(insertWithPriority(env.client.q, -1)).rejects.toMatchObject({ code: '23514', message: expect.stringMatching(/workflows_priority_not_negative/) });
    // A workflow started with priority runs (the cap only lowers it).
    const runs = await insertWithPriority(env.client.q, 9, false);
    expect((await waitForWorkflow(env.t, runs)).status).toBe('completed');
  });

  it('the caps written at start-up follow clients.ROLE.maxPriority', async () => {
    const role = `capcfg_${Date.now().toString(36)}`;
    const env = await securityEnv({ clientName: role, config: { clients: { [role]: { maxPriority: 4 } } } });
    const id = await insertWithPriority(env.client.q, 100);
    expect((await getWorkflow(env.t, id)).priority).toBe(4);
  });

  it("a client cannot raise a priority afterwards: neither another role's nor its own, new or running", async () => {
    const env = await securityEnv();
    const victim = await createClientRole(env.t);
    const theirs = await insertWithPriority(victim.q, 0);
    const own = await insertWithPriority(env.client.q, 0);
    for (const id of [theirs, own]) {
      await refused(env.client.q(`UPDATE stepd.workflows SET priority = 1000 WHERE id = $1`, [id]), /permission denied/);
      expect((await getWorkflow(env.t, id)).priority).toBe(0);
    }
    // Steps cannot be reprioritised or ungated either.
    const running = await insertWithPriority(env.t.q, 0, false);
    await waitForWorkflow(env.t, running);
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET priority = 1000 WHERE workflow_id = $1`, [running]), /permission denied/);
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET gated = false WHERE workflow_id = $1`, [running]), /permission denied/);
  });

  it('a client cannot set keys or holds, nor touch the caps, buckets or capacity_verdicts; a role with no grants reaches nothing', async () => {
    const env = await securityEnv();
    await refused(
      env.client.q(`INSERT INTO stepd.workflows (name, flow, concurrency_key, key_held) VALUES ('k', $1, 'victim-key', true)`, [JSON.stringify(FLOW)]),
      /permission denied/,
    );
    for (const sql of [
      `INSERT INTO stepd.priority_caps (role, max_priority) VALUES (current_user, 1000000)`,
      `UPDATE stepd.priority_caps SET max_priority = 1000000`,
      `DELETE FROM stepd.priority_caps`,
      `INSERT INTO stepd.rate_buckets (name, tokens, refilled_at) VALUES ('core.noop', 1e9, now())`,
      `UPDATE stepd.rate_buckets SET tokens = 1e9`,
      `SELECT * FROM stepd.capacity_verdicts(ARRAY[1]::bigint[], 10)`,
    ]) {
      await refused(env.client.q(sql), /permission denied/);
    }
    await env.client.session(async (run) => {
      await run('BEGIN');
      await refused(run(`LOCK TABLE stepd.priority_caps IN SHARE ROW EXCLUSIVE MODE`), /permission denied/);
      await run('ROLLBACK');
    });
    const nobody = await createLoginRole(env.t, null, `nog_${Date.now().toString(36)}`);
    const pool = new pg.Pool({ connectionString: nobody.url, max: 1 });
    pool.on('error', () => {});
    try {
      for (const sql of [`SELECT * FROM ${env.t.schema}.priority_caps`, `SELECT * FROM ${env.t.schema}.capacity_verdicts(ARRAY[1]::bigint[], 1)`]) {
        await expect(pool.query(sql)).rejects.toMatchObject({ code: '42501' });
      }
    } finally {
      await pool.end();
    }
  });

  it('a role a DBA over-granted (UPDATE on both tables) is still refused keys, holds, priorities and gates by the guard', async () => {
    const env = await securityEnv();
    const s = pg.escapeIdentifier(env.t.schema);
    await env.t.db.query(`GRANT SELECT, INSERT, UPDATE ON ${s}.workflows, ${s}.workflow_steps TO ${pg.escapeIdentifier(env.client.role)}`);
    const id = await insertWithPriority(env.client.q, 0);
    await refused(env.client.q(`UPDATE stepd.workflows SET priority = 50 WHERE id = $1`, [id]), /priority and concurrency key of workflow/);
    await refused(env.client.q(`UPDATE stepd.workflows SET key_held = true, concurrency_key = 'x' WHERE id = $1`, [id]), /priority and concurrency key of workflow/);
    await refused(
      env.client.q(`INSERT INTO stepd.workflows (name, flow, concurrency_key, concurrency_limit, key_held) VALUES ('k', $1, 'x', 1, true)`, [JSON.stringify(FLOW)]),
      /may not set concurrency_key/,
    );
    const done = await insertWithPriority(env.t.q, 0, false);
    await waitForWorkflow(env.t, done);
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET gated = true, concurrency_key = 'victim' WHERE workflow_id = $1`, [done]), /are the executor's|only a pending step/);
  });
});
