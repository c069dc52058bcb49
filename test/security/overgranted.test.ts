/**
 * Defence in depth: the guard triggers, not only the client role's column grants, hold the
 * contract. A role that a DBA over-granted — SELECT, INSERT, UPDATE, DELETE and TRUNCATE on both
 * tables, as issue 9's service had — but that is neither the tables' owner nor a member of
 * `<schema>_executor` is refused every bypass, with or without the executor marker, each with
 * an error naming the rule.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  getSteps,
  getWorkflow,
  insertWorkflow,
  securityEnv,
  startLocalServer,
  waitForStep,
  waitForWorkflow,
  type SecurityEnv,
} from './helpers.js';

const GATE_FLOW = {
  start: 'approve',
  steps: { approve: { approval: true, next: 'pay' }, pay: { tool: 'probe.echo', args: { paid: 1 }, done: true, output: '{{result}}' } },
};

/** A role with ordinary privileges on both tables, refused by a guard rule (SQLSTATE 23514) matching `rule`. */
async function guardRefuses(promise: Promise<unknown>, rule: RegExp): Promise<void> {
  await expect(promise).rejects.toMatchObject({ code: '23514', message: expect.stringMatching(rule) });
}

/** The attacker of `env`, over-granted ordinary privileges on both tables, with the marker set in its session. */
async function overgranted(env: SecurityEnv): Promise<void> {
  const s = pg.escapeIdentifier(env.t.schema);
  const r = pg.escapeIdentifier(env.client.role);
  await env.t.db.query(`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ${s}.workflows, ${s}.workflow_steps TO ${r}`);
  await env.t.db.query(`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${s} TO ${r}`);
}

async function gateVictim(env: SecurityEnv): Promise<{ id: string; gate: string }> {
  const id = await insertWorkflow(env.t, GATE_FLOW, {}, { user: 'victim' });
  return { id, gate: (await waitForStep(env.t, id, 'approve', 'pending')).id };
}

const WITH_MARKER = `SELECT set_config('stepd.executor', 'on', false), set_config('stepd.cascade', 'on', false)`;

describe('a role with ordinary privileges on both tables, marker set, is still guarded', () => {
  it('cannot mark a step done with a forged result, nor write executor columns of a step', async () => {
    const env = await securityEnv();
    await overgranted(env);
    const v = await gateVictim(env);
    await env.client.session(async (run) => {
      await run(WITH_MARKER);
      await guardRefuses(run(`UPDATE stepd.workflow_steps SET status = 'done', result = '{"forged": true}' WHERE id = $1`, [v.gate]), /can only be set to 'ready'/);
      await guardRefuses(
        run(`UPDATE stepd.workflow_steps SET status = 'done', result = '{"forged": true}', completed_at = now() WHERE id = $1`, [v.gate]),
        /may set only status, result and readied_by|can only be set to 'ready'/,
      );
      await guardRefuses(run(`UPDATE stepd.workflow_steps SET status = 'ready', readied_role = 'postgres' WHERE id = $1`, [v.gate]), /may set only status, result and readied_by/);
      await guardRefuses(run(`DELETE FROM stepd.workflow_steps WHERE id = $1`, [v.gate]), /steps cannot be deleted one by one/);
    });
    expect((await getSteps(env.t, v.id)).map((s) => [s.status, s.result])).toEqual([['pending', null]]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('cannot inject a ready step row into another workflow', async () => {
    const env = await securityEnv();
    await overgranted(env);
    const server = await startLocalServer();
    const v = await gateVictim(env);
    await env.client.session(async (run) => {
      await run(WITH_MARKER);
      await guardRefuses(
        run(`INSERT INTO stepd.workflow_steps (workflow_id, name, tool, args, status, ready_at) VALUES ($1, 'pay', 'http.request', $2, 'ready', now())`, [
          v.id,
          JSON.stringify({ url: server.base }),
        ]),
        /steps are created by the executor/,
      );
    });
    expect((await getSteps(env.t, v.id)).map((s) => s.name)).toEqual(['approve']);
    await env.bystander.assertUndisturbedAndServed();
    expect(server.connections()).toBe(0);
  });

  it('cannot rewrite created_by, flip statuses back, or edit an admitted flow', async () => {
    const env = await securityEnv();
    await overgranted(env);
    const v = await gateVictim(env);
    const completed = await insertWorkflow(env.t, { start: 'a', steps: { a: { tool: 'probe.echo', args: { once: 1 }, done: true } } }, {}, { user: 'victim' });
    expect((await waitForWorkflow(env.t, completed)).status).toBe('completed');
    await env.client.session(async (run) => {
      await run(WITH_MARKER);
      await guardRefuses(run(`UPDATE stepd.workflows SET created_by = 'admin' WHERE id = $1`, [v.id]), /only a workflow that is still 'new' can be edited/);
      await guardRefuses(run(`UPDATE stepd.workflows SET status = 'new' WHERE id = $1`, [v.id]), /can only be set to 'cancelled'/);
      await guardRefuses(run(`UPDATE stepd.workflows SET status = 'new' WHERE id = $1`, [completed]), /can only be set to 'cancelled'/);
      await guardRefuses(run(`UPDATE stepd.workflows SET status = 'new', output = NULL, completed_at = NULL WHERE id = $1`, [completed]), /may not be changed that way|can only be set to 'cancelled'/);
      await guardRefuses(run(`UPDATE stepd.workflows SET flow = '{"start":"x","steps":{"x":{"tool":"http.request"}}}' WHERE id = $1`, [v.id]), /is frozen/);
      await guardRefuses(run(`UPDATE stepd.workflows SET created_role = 'mallory' WHERE id = $1`, [v.id]), /may not be changed|can be edited|created_role/);
    });
    expect(await getWorkflow(env.t, v.id)).toMatchObject({ status: 'running', created_by: 'victim', flow: GATE_FLOW, created_role: 'postgres' });
    expect(env.probe.callsOf(completed)).toHaveLength(1);
    await env.bystander.assertUndisturbedAndServed();
    expect((await getWorkflow(env.t, completed)).status).toBe('completed');
    expect(env.probe.callsOf(completed)).toHaveLength(1);
  });

  it('cannot TRUNCATE either table or DELETE a running workflow', async () => {
    const env = await securityEnv();
    await overgranted(env);
    const v = await gateVictim(env);
    await env.client.session(async (run) => {
      await run(WITH_MARKER);
      await guardRefuses(run(`TRUNCATE stepd.workflow_steps`), /cannot be truncated/);
      await guardRefuses(run(`TRUNCATE stepd.workflows CASCADE`), /cannot be truncated/);
      await guardRefuses(run(`DELETE FROM stepd.workflows WHERE id = $1`, [v.id]), /only completed, failed or cancelled workflows can be deleted/);
    });
    expect((await getSteps(env.t, v.id)).map((s) => s.status)).toEqual(['pending']);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('cannot forge who inserted: created_role is the session role whatever the insert says', async () => {
    const env = await securityEnv();
    await overgranted(env);
    const flow = JSON.stringify({ start: 'a', steps: { a: { tool: 'core.noop' } } });
    const attempt = await env.client
      .session(async (run) => {
        await run(WITH_MARKER);
        return run(`INSERT INTO stepd.workflows (name, flow, created_role) VALUES ('forged', $1, 'postgres') RETURNING id`, [flow]);
      })
      .then(
        (rows) => ({ rows }),
        (err: { code?: string }) => ({ err }),
      );
    if ('err' in attempt) {
      expect(attempt.err.code).toBe('23514');
    } else {
      const [row] = await env.t.q(`SELECT created_role FROM stepd.workflows WHERE id = $1`, [attempt.rows[0].id]);
      expect(row.created_role).toBe(env.client.role);
    }
    await env.bystander.assertUndisturbedAndServed();
  });
});
