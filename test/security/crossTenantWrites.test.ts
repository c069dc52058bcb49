/**
 * Cross-tenant writes through the plain SQL contract (DESIGN.md §7, "Tenants are isolated"): two
 * service roles that each hold only `<schema>_client`. The attacker tries every write the contract
 * lets a client make on the victim's workflows: cancel (new and running, a child), ready a gate
 * (with and without a result), redrive, fork, delete. Each is refused with SQLSTATE 42501 naming
 * the rule, and the victim's rows are as they were. The victim itself, a role granted the victim's
 * role, and a trusted role keep every power; a gate that names approvers stays open to readying
 * (the executor judges the approver: gateApprovers.test.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { OperationError } from '../../src/api/errors.js';
import { Operations } from '../../src/api/operations.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { describe, expect, it } from 'vitest';
import {
  clientInsert,
  createClientRole,
  createLoginRole,
  getSteps,
  getWorkflow,
  onCleanup,
  refused,
  securityEnv,
  waitForStep,
  waitForWorkflow,
  type ClientRole,
  type SecurityEnv,
} from './helpers.js';

const GATE_FLOW = {
  start: 'approve',
  steps: {
    approve: { approval: true, next: 'pay' },
    pay: { tool: 'probe.whoami', done: true, output: '{{result}}' },
  },
};
const FAILING_FLOW = { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } };
const PARENT_FLOW = {
  start: 'child',
  steps: { child: { workflow: { name: 'kid', input: {} }, done: true } },
};

async function victimEnv(): Promise<SecurityEnv & { victim: ClientRole }> {
  const env = await securityEnv({ config: { clients: {} } });
  const victim = await createClientRole(env.t, { name: `vic_${env.client.role.slice(4)}` });
  await victim.q(`INSERT INTO stepd.flows (name, flow) VALUES ('kid', $1)`, [JSON.stringify(GATE_FLOW)]);
  return { ...env, victim };
}

async function rowsOf(env: SecurityEnv, id: string): Promise<unknown> {
  const wf = await getWorkflow(env.t, id);
  const steps = await getSteps(env.t, id);
  return { status: wf.status, cancelled_at: wf.cancelled_at, steps: steps.map((s) => [s.name, s.status, s.result, s.readied_by]) };
}

describe('a client role cannot change another role’s workflows', () => {
  it('cancel: refused for the victim’s new and running workflows; the victim cancels its own', async () => {
    const env = await victimEnv();
    const running = await clientInsert(env.victim, GATE_FLOW, { user: env.victim.role });
    await waitForStep(env.t, running, 'approve', 'pending');
    const before = await rowsOf(env, running);
    const err = await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [running]), /started by role .*may cancel only/);
    expect(err.code).toBe('42501');
    expect(err.message).toContain(env.victim.role);
    expect(await rowsOf(env, running)).toEqual(before);

    // A `new` one (start_at in the future keeps it new).
    const [queued] = await env.victim.q<{ id: string }>(
      `INSERT INTO stepd.workflows (name, flow, input, start_at) VALUES ('later', $1, '{}', now() + interval '1 hour') RETURNING id`,
      [JSON.stringify(GATE_FLOW)],
    );
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [queued!.id]), /may cancel only/);
    // A bulk cancel that meets one foreign row changes nothing at all.
    const own = await clientInsert(env.client, GATE_FLOW);
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = ANY($1::bigint[])`, [[own, running]]), /may cancel only/);
    expect((await getWorkflow(env.t, own)).status).not.toBe('cancelled');

    // Each role cancels its own.
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [own]);
    await env.victim.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = ANY($1::bigint[])`, [[running, queued!.id]]);
    expect((await waitForWorkflow(env.t, running)).status).toBe('cancelled');
    expect(env.probe.callsOf(running)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('cancel: refused for a trusted role’s workflow and for another role’s sub-workflow child', async () => {
    const env = await victimEnv();
    // The bystander was inserted by the superuser: not the client's.
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [env.bystander.id]), /may cancel only/);
    const parent = await clientInsert(env.victim, PARENT_FLOW);
    const child = await waitForChild(env, parent);
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [child]), /may cancel only/);
    expect((await getWorkflow(env.t, child)).status).toBe('running');
    // The victim's cancel of the parent still cascades to its child.
    await env.victim.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [parent]);
    expect((await waitForWorkflow(env.t, child)).status).toBe('cancelled');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('gate: readying the victim’s gate, with or without a result, is refused; the victim approves it', async () => {
    const env = await victimEnv();
    const id = await clientInsert(env.victim, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    const before = await rowsOf(env, id);
    const err = await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]), /may ready only/);
    expect(err.code).toBe('42501');
    await refused(
      env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false}', readied_by = $2 WHERE id = $1`, [gate.id, env.victim.role]),
      /may ready only/,
    );
    const bystanderGate = await waitForStep(env.t, env.bystander.id, 'approve', 'pending');
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [bystanderGate.id]), /may ready only/);
    expect(await rowsOf(env, id)).toEqual(before);

    await env.victim.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('gate: a gate of the victim’s sub-workflow child is the victim’s too', async () => {
    const env = await victimEnv();
    const parent = await clientInsert(env.victim, PARENT_FLOW);
    const child = await waitForChild(env, parent);
    const gate = await waitForStep(env.t, child, 'approve', 'pending');
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]), /may ready only/);
    await env.victim.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    expect((await waitForWorkflow(env.t, parent)).status).toBe('completed');
  });

  it('a gate that names approvers stays open to other roles: the executor judges the approver', async () => {
    const env = await victimEnv();
    const flow = { ...GATE_FLOW, steps: { ...GATE_FLOW.steps, approve: { approval: { approvers: ['james'] }, next: 'pay' } } };
    const id = await clientInsert(env.victim, flow);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    const done = await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 RETURNING id`, [gate.id]);
    expect(done).toHaveLength(1);
    // Not an approver (no actAs for james): the executor puts the gate back to waiting.
    const back = await waitForStep(env.t, id, 'approve', 'pending');
    expect(back.id).toBe(gate.id);
    expect(env.probe.callsOf(id)).toEqual([]);
  });

  it('redrive, fork and delete of the victim’s workflows, and changes to its schedules, triggers and flow names, are refused (the map of the rest)', async () => {
    const env = await victimEnv();
    const failed = await clientInsert(env.victim, FAILING_FLOW);
    expect((await waitForWorkflow(env.t, failed)).status).toBe('failed');
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed'`, [failed]), /may not redrive/);
    await refused(env.client.q(`SELECT stepd.fork_workflow($1)`, [failed]), /.+/);
    await refused(env.client.q(`SELECT stepd.delete_workflows(ARRAY[$1::bigint])`, [failed]), /may delete only its own/);
    expect((await getWorkflow(env.t, failed)).status).toBe('failed');

    // The victim's schedule, signal trigger and flow name are its own too.
    const sched = `s_${env.victim.role}`;
    const trig = `t_${env.victim.role}`;
    await env.victim.q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ($1, '0 3 * * *', 'kid')`, [sched]);
    await env.victim.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ($1, 'order.placed', 'kid')`, [trig]);
    await refused(env.client.q(`UPDATE stepd.schedules SET paused = true WHERE name = $1`, [sched]), /.+/);
    await refused(env.client.q(`UPDATE stepd.schedules SET cron = '* * * * *' WHERE name = $1`, [sched]), /.+/);
    await refused(env.client.q(`SELECT stepd.remove_schedule($1)`, [sched]), /.+/);
    await refused(env.client.q(`UPDATE stepd.triggers SET flow = 'other' WHERE name = $1`, [trig]), /.+/);
    await refused(env.client.q(`SELECT stepd.remove_trigger($1)`, [trig]), /.+/);
    await refused(env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('kid', $1)`, [JSON.stringify(GATE_FLOW)]), /.+/);
    expect(await env.t.q(`SELECT paused, cron FROM stepd.schedules WHERE name = $1`, [sched])).toEqual([{ paused: false, cron: '0 3 * * *' }]);
    expect(await env.t.q(`SELECT flow FROM stepd.triggers WHERE name = $1`, [trig])).toEqual([{ flow: 'kid' }]);
  });

  it('signals stay broadcast (DESIGN §2c): another role’s signal wakes the victim’s wait, stamped with the sender’s role', async () => {
    const env = await victimEnv();
    const flow = { start: 'wait', steps: { wait: { signal: { name: 'payment.received', key: '{{input.order}}' }, done: true, output: '{{result}}' } } };
    const id = await clientInsert(env.victim, flow, { input: { order: 'o-7' } });
    await waitForStep(env.t, id, 'wait', 'pending');
    await env.client.q(`INSERT INTO stepd.signals (name, key, payload) VALUES ('payment.received', 'o-7', '{"role": "forged"}')`);
    const done = await waitForWorkflow(env.t, id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    // The flow can tell who sent it: the role is the database's, the payload the sender's.
    expect(done.output).toMatchObject({ name: 'payment.received', key: 'o-7', role: env.client.role, payload: { role: 'forged' } });
  });

  it('through the operations layer as the attacker’s own role (`stepd mcp` on stdio): a user name that passes its check still meets the database’s rule', async () => {
    const env = await victimEnv();
    const id = await clientInsert(env.victim, GATE_FLOW, { user: env.victim.role });
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    const pool = createPool({ url: env.client.url, schema: env.t.schema, role: 'client', max: 1 });
    const db = createKysely(pool);
    onCleanup(() => db.destroy());
    const ops = new Operations({ pool, db, schema: env.t.schema });
    // The attacker claims to be the victim's user (STEPD_USER is the caller's to set).
    const cancel = await ops.cancelWorkflow(env.victim.role, { workflowId: id }).catch((e: unknown) => e as OperationError);
    expect(cancel).toBeInstanceOf(OperationError);
    expect(cancel).toMatchObject({ code: 'permission_denied', message: expect.stringMatching(/may cancel only .*clients\.actAs/) });
    const approve = await ops.approveStep(env.victim.role, { stepId: gate.id }).catch((e: unknown) => e as OperationError);
    expect(approve).toMatchObject({ code: 'permission_denied', message: expect.stringMatching(/may ready only/) });
    expect(await rowsOf(env, id)).toMatchObject({ status: 'running' });
  });

  it('a role granted the victim’s role acts for it; a trusted login cancels and readies anything', async () => {
    const env = await victimEnv();
    const id = await clientInsert(env.victim, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    const { url } = await createLoginRole(env.t, env.victim.role, `dlg_${env.client.role.slice(4)}`);
    const delegate = new pg.Pool({ connectionString: url, max: 1 });
    delegate.on('error', () => {}); // the role's cleanup may terminate an idle connection first (57P01)
    onCleanup(() => delegate.end().catch(() => {}));
    await delegate.query(`UPDATE ${env.t.schema}.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    expect((await waitForWorkflow(env.t, id)).status).toBe('completed');
    const second = await clientInsert(env.victim, GATE_FLOW);
    await waitForStep(env.t, second, 'approve', 'pending');
    await delegate.query(`UPDATE ${env.t.schema}.workflows SET status = 'cancelled' WHERE id = $1`, [second]);
    expect((await waitForWorkflow(env.t, second)).status).toBe('cancelled');
    // The superuser (trusted) as any operator.
    const third = await clientInsert(env.victim, GATE_FLOW);
    await waitForStep(env.t, third, 'approve', 'pending');
    await env.t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [third]);
    expect((await waitForWorkflow(env.t, third)).status).toBe('cancelled');
  });
});

describe('clients.actAs decides whose workflows a role may act for', () => {
  it('a role whose actAs covers the workflow’s user cancels it and readies its gates; `_` in a pattern matches only itself', async () => {
    const hex = randomBytes(5).toString('hex');
    const [atk, vic] = [`atk_${hex}`, `vic_${hex}`];
    const env = await securityEnv({ clientName: atk, config: { clients: { [atk]: { actAs: ['fin_*'] }, [vic]: { actAs: ['fin_*', 'finXops'] } } } });
    const victim = await createClientRole(env.t, { name: vic });
    const covered = await clientInsert(victim, GATE_FLOW, { user: 'fin_ops' });
    const gate = await waitForStep(env.t, covered, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    const done = await waitForWorkflow(env.t, covered);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.output).toEqual({ user: 'fin_ops' });
    const second = await clientInsert(victim, GATE_FLOW, { user: 'fin_ops' });
    await waitForStep(env.t, second, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [second]);
    expect((await waitForWorkflow(env.t, second)).status).toBe('cancelled');

    const lookalike = await clientInsert(victim, GATE_FLOW, { user: 'finXops' });
    const other = await waitForStep(env.t, lookalike, 'approve', 'pending');
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [other.id]), /may ready only/);
    await refused(env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [lookalike]), /may cancel only/);
    // The rules are the config's: rewritten at every executor start, no client can write them.
    expect(await env.t.q(`SELECT role, patterns FROM stepd.client_act_as ORDER BY role`)).toEqual([
      { role: atk, patterns: ['fin_*'] },
      { role: vic, patterns: ['fin_*', 'finXops'] },
    ]);
    await refused(env.client.q(`INSERT INTO stepd.client_act_as (role, patterns) VALUES ($1, ARRAY['*'])`, [atk]), /permission denied/);
    await refused(env.client.q(`SELECT * FROM stepd.client_act_as`), /permission denied/);
    await refused(env.client.q(`SELECT stepd.stepd_role_acts_for($1, 'x', 'y')`, [atk]), /permission denied/);
    await env.bystander.assertUndisturbedAndServed();
  });
});

async function waitForChild(env: SecurityEnv, parent: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const [row] = await env.t.q<{ id: string }>(`SELECT id FROM stepd.workflows WHERE parent_id = $1 AND status = 'running'`, [parent]);
    if (row) {
      await waitForStep(env.t, row.id, 'approve', 'pending');
      return row.id;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no running child of workflow ${parent}`);
}
