/**
 * The guard decides by role: a service connecting as a non-superuser role granted
 * `<schema>_client` cannot act as the executor, whatever it sets (`stepd.executor`,
 * `set_config`, `stepd.cascade`). Each bypass from issue 9 is tried against workflows a live
 * executor is running; each is refused with an error naming the rule or the missing privilege,
 * the attacked rows stay as they were, and a bystander workflow completes afterwards.
 */
import { describe, expect, it } from 'vitest';
import {
  clientInsert,
  getSteps,
  getWorkflow,
  insertWorkflow,
  refused,
  schemaRoles,
  securityEnv,
  startLocalServer,
  waitForStep,
  waitForWorkflow,
  type SecurityEnv,
} from './helpers.js';

const GATE_FLOW = {
  start: 'approve',
  steps: { approve: { approval: true, next: 'pay' }, pay: { tool: 'probe.echo', args: { paid: '{{input.amount}}' }, done: true, output: '{{result}}' } },
};
const SLEEP_FLOW = { start: 's', steps: { s: { tool: 'core.sleep', args: { ms: 600_000 }, timeout: '20m' } } };
const ONCE_FLOW = { start: 'charge', steps: { charge: { tool: 'probe.echo', args: { charged: 1 }, done: true, output: '{{result}}' } } };

/** Another user's workflow waiting at its gate (inserted by a trusted service, not the attacker). */
async function victimAtGate(env: SecurityEnv): Promise<{ id: string; gate: string }> {
  const id = await insertWorkflow(env.t, GATE_FLOW, { amount: 10 }, { name: 'victim', user: 'victim' });
  const gate = await waitForStep(env.t, id, 'approve', 'pending');
  return { id, gate: gate.id };
}

async function victimRunning(env: SecurityEnv): Promise<{ id: string; step: string }> {
  const id = await insertWorkflow(env.t, SLEEP_FLOW, {}, { name: 'victim', user: 'victim' });
  const step = await waitForStep(env.t, id, 's', 'running');
  return { id, step: step.id };
}

async function victimCompleted(env: SecurityEnv): Promise<string> {
  const id = await insertWorkflow(env.t, ONCE_FLOW, {}, { name: 'victim', user: 'victim' });
  expect((await waitForWorkflow(env.t, id)).status).toBe('completed');
  return id;
}

const MARKERS = [
  { name: "SET stepd.executor = 'on'", sql: `SET stepd.executor = 'on'` },
  { name: "set_config('stepd.executor', 'on', false)", sql: `SELECT set_config('stepd.executor', 'on', false)` },
  { name: "SET stepd.cascade = 'on'", sql: `SET stepd.cascade = 'on'` },
];

describe('the executor marker grants a client role nothing', () => {
  it.each(MARKERS)('after $name, marking a pending gate done with a forged result is refused', async ({ sql }) => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    await env.client.session(async (run) => {
      await run(sql);
      await refused(
        run(`UPDATE stepd.workflow_steps SET status = 'done', result = '{"approved": true, "forged": true}' WHERE id = $1`, [v.gate]),
        /can only be set to 'ready'|permission denied/,
      );
      await refused(
        run(`UPDATE stepd.workflow_steps SET status = 'done', result = '{"forged": true}', completed_at = now() WHERE id = $1`, [v.gate]),
        /may set only status, result and readied_by|can only be set to 'ready'|permission denied/,
      );
    });
    const gate = (await getSteps(env.t, v.id)).find((s) => s.id === v.gate)!;
    expect({ status: gate.status, result: gate.result }).toEqual({ status: 'pending', result: null });
    expect(env.probe.callsOf(v.id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it.each(MARKERS)('after $name, forging the result of a running tool step is refused', async ({ sql }) => {
    const env = await securityEnv();
    const v = await victimRunning(env);
    await env.client.session(async (run) => {
      await run(sql);
      await refused(
        run(`UPDATE stepd.workflow_steps SET status = 'done', result = '{"forged": true}' WHERE id = $1`, [v.step]),
        /is running; only a pending step can be readied|can only be set to 'ready'|permission denied/,
      );
    });
    expect((await getSteps(env.t, v.id)).map((s) => [s.status, s.result])).toEqual([['running', null]]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a transaction-local set_config marker grants nothing either', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    await env.client.session(async (run) => {
      await run('BEGIN');
      await run(`SELECT set_config('stepd.executor', 'on', true), set_config('stepd.cascade', 'on', true)`);
      await refused(run(`UPDATE stepd.workflow_steps SET status = 'done' WHERE id = $1`, [v.gate]), /can only be set to 'ready'|permission denied/);
      await run('ROLLBACK');
    });
    expect((await getSteps(env.t, v.id)).map((s) => s.status)).toEqual(['pending']);
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('a client role cannot write step rows', () => {
  it.each([{ marker: false }, { marker: true }])(
    'injecting a ready http.request step into another workflow is refused (marker: $marker), and nothing is called',
    async ({ marker }) => {
      const env = await securityEnv();
      const server = await startLocalServer();
      const v = await victimAtGate(env);
      await env.client.session(async (run) => {
        if (marker) await run(`SET stepd.executor = 'on'`);
        await refused(
          run(`INSERT INTO stepd.workflow_steps (workflow_id, name, tool, args, status) VALUES ($1, 'pay', 'http.request', $2, 'ready')`, [
            v.id,
            JSON.stringify({ url: `${server.base}/admin/delete-everything` }),
          ]),
          /steps are created by the executor|permission denied/,
        );
      });
      expect((await getSteps(env.t, v.id)).map((s) => s.name)).toEqual(['approve']);
      await env.bystander.assertUndisturbedAndServed();
      expect(server.connections()).toBe(0);
    },
  );

  it('deleting single steps is refused, even with the marker', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    await env.client.session(async (run) => {
      await run(`SET stepd.executor = 'on'`);
      await refused(run(`DELETE FROM stepd.workflow_steps WHERE id = $1`, [v.gate]), /steps cannot be deleted one by one|permission denied/);
    });
    expect((await getSteps(env.t, v.id)).map((s) => s.status)).toEqual(['pending']);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a step row naming a tool the frozen flow does not name runs nothing: it fails with step_mismatch', async () => {
    // Defence in depth: even a row that reached the table (here written by a superuser) cannot
    // choose the tool; the executor takes it from the flow.
    const env = await securityEnv();
    const server = await startLocalServer();
    const v = await victimAtGate(env);
    const conn = await env.t.db.connect();
    try {
      await conn.query('BEGIN');
      await conn.query(`SET LOCAL stepd.executor = 'on'`);
      await conn.query(`INSERT INTO ${env.t.schema}.workflow_steps (workflow_id, name, tool, args, status, ready_at) VALUES ($1, 'pay', 'http.request', $2, 'ready', now())`, [
        v.id,
        JSON.stringify({ url: `${server.base}/admin` }),
      ]);
      await conn.query('COMMIT');
    } finally {
      conn.release();
    }
    const injected = await waitForStep(env.t, v.id, 'pay', 'failed');
    expect(injected.error).toMatchObject({ code: 'step_mismatch', message: expect.stringMatching(/http\.request.*probe\.echo/) });
    expect(server.connections()).toBe(0);
    expect(env.probe.callsOf(v.id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('a client role cannot rewrite a workflow', () => {
  it('rewriting created_by of a running workflow is refused, with or without the marker', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    await refused(env.client.q(`UPDATE stepd.workflows SET created_by = 'admin' WHERE id = $1`, [v.id]), /only a workflow that is still 'new' can be edited|permission denied/);
    await env.client.session(async (run) => {
      await run(`SET stepd.executor = 'on'`);
      await refused(run(`UPDATE stepd.workflows SET created_by = 'admin' WHERE id = $1`, [v.id]), /only a workflow that is still 'new' can be edited|permission denied/);
    });
    expect((await getWorkflow(env.t, v.id)).created_by).toBe('victim');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('flipping a completed workflow back to new is refused, so its side effect happens once', async () => {
    const env = await securityEnv();
    const id = await victimCompleted(env);
    for (const marker of [false, true]) {
      await env.client.session(async (run) => {
        if (marker) await run(`SET stepd.executor = 'on'`);
        await refused(run(`UPDATE stepd.workflows SET status = 'new' WHERE id = $1`, [id]), /can only be set to 'cancelled'|permission denied/);
        await refused(
          run(`UPDATE stepd.workflows SET status = 'new', completed_at = NULL, output = NULL WHERE id = $1`, [id]),
          /may not be changed that way|can only be set to 'cancelled'|permission denied/,
        );
      });
    }
    // The bystander's completion below proves the executor had every chance to re-run it.
    await env.bystander.assertUndisturbedAndServed();
    expect((await getWorkflow(env.t, id)).status).toBe('completed');
    expect(env.probe.callsOf(id)).toHaveLength(1);
  });

  it('flipping a running workflow back to new is refused', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    await env.client.session(async (run) => {
      await run(`SET stepd.executor = 'on'`);
      await refused(run(`UPDATE stepd.workflows SET status = 'new' WHERE id = $1`, [v.id]), /can only be set to 'cancelled'|permission denied/);
    });
    expect((await getWorkflow(env.t, v.id)).status).toBe('running');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('the flow of an admitted workflow cannot be edited, directly or by moving it to new, editing and moving it back', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    const evil = JSON.stringify({ start: 'approve', steps: { approve: { approval: true, next: 'pay' }, pay: { tool: 'http.request', args: { url: 'http://127.0.0.1:1/' } } } });
    await refused(env.client.q(`UPDATE stepd.workflows SET flow = $2 WHERE id = $1`, [v.id, evil]), /is frozen|permission denied/);
    await env.client.session(async (run) => {
      await run(`SET stepd.executor = 'on'`);
      await run('BEGIN');
      await refused(run(`UPDATE stepd.workflows SET status = 'new' WHERE id = $1`, [v.id]), /can only be set to 'cancelled'|permission denied/);
      await run('ROLLBACK');
      await refused(run(`UPDATE stepd.workflows SET flow = $2 WHERE id = $1`, [v.id, evil]), /is frozen|permission denied/);
    });
    expect((await getWorkflow(env.t, v.id)).flow).toEqual(GATE_FLOW);
    // The gate, once approved, runs what the frozen flow says.
    await env.t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [v.gate]);
    expect((await waitForWorkflow(env.t, v.id)).output).toEqual({ paid: 10 });
    await env.bystander.assertUndisturbedAndServed();
  });

  it("the client's own workflow cannot be edited once admitted either", async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE_FLOW, { input: { amount: 1 } });
    await waitForStep(env.t, id, 'approve', 'pending');
    await env.client.session(async (run) => {
      await run(`SET stepd.executor = 'on'`);
      await refused(run(`UPDATE stepd.workflows SET input = '{"amount": 1000000}' WHERE id = $1`, [id]), /only a workflow that is still 'new' can be edited|permission denied/);
      await refused(run(`UPDATE stepd.workflows SET status = 'completed', output = '{"paid": 0}' WHERE id = $1`, [id]), /may not be changed that way|can only be set to 'cancelled'|permission denied/);
    });
    expect(await getWorkflow(env.t, id)).toMatchObject({ status: 'running', input: { amount: 1 }, output: null });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('TRUNCATE of either table is refused, with or without the marker, and nothing is lost', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    for (const marker of [false, true]) {
      await env.client.session(async (run) => {
        if (marker) await run(`SET stepd.executor = 'on'`);
        await refused(run(`TRUNCATE stepd.workflow_steps`), /cannot be truncated|permission denied/);
        await refused(run(`TRUNCATE stepd.workflows CASCADE`), /cannot be truncated|permission denied/);
      });
    }
    expect((await getSteps(env.t, v.id)).map((s) => s.status)).toEqual(['pending']);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('deleting a running workflow is refused, with or without the marker', async () => {
    const env = await securityEnv();
    const v = await victimRunning(env);
    for (const marker of [false, true]) {
      await env.client.session(async (run) => {
        if (marker) await run(`SET stepd.executor = 'on'`);
        await refused(run(`DELETE FROM stepd.workflows WHERE id = $1`, [v.id]), /only completed, failed or cancelled workflows can be deleted|permission denied/);
      });
    }
    expect((await getWorkflow(env.t, v.id)).status).toBe('running');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('a client role cannot become the executor', () => {
  it('SET ROLE, GRANT and SET SESSION AUTHORIZATION to the executor role are refused', async () => {
    const env = await securityEnv();
    const { executor } = schemaRoles(env.t.schema);
    const ident = `"${executor}"`;
    await expect(env.client.q(`SET ROLE ${ident}`)).rejects.toMatchObject({ code: '42501' });
    await expect(env.client.q(`GRANT ${ident} TO "${env.client.role}"`)).rejects.toMatchObject({ code: '42501' });
    await expect(env.client.q(`SET SESSION AUTHORIZATION postgres`)).rejects.toMatchObject({ code: '42501' });
    const [me] = await env.client.q(
      `SELECT pg_has_role(session_user, $1, 'MEMBER') AS executor, rolsuper AS superuser FROM pg_roles WHERE rolname = session_user`,
      [executor],
    );
    expect(me).toEqual({ executor: false, superuser: false });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('cannot create tables, functions or triggers in the schema', async () => {
    const env = await securityEnv();
    const v = await victimAtGate(env);
    await expect(env.client.q(`CREATE TABLE stepd.approvals (step_id bigint)`)).rejects.toMatchObject({ code: '42501' });
    await expect(env.client.q(`CREATE FUNCTION stepd.f() RETURNS int LANGUAGE sql AS 'SELECT 1'`)).rejects.toMatchObject({ code: '42501' });
    await expect(env.client.q(`ALTER TABLE stepd.workflow_steps DISABLE TRIGGER USER`)).rejects.toMatchObject({ code: '42501' });
    await expect(env.client.q(`CREATE TRIGGER x BEFORE UPDATE ON stepd.workflow_steps FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()`)).rejects.toMatchObject({ code: '42501' });
    expect((await getSteps(env.t, v.id)).map((s) => s.status)).toEqual(['pending']);
    await env.bystander.assertUndisturbedAndServed();
  });
});
