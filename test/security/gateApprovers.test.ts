/**
 * Gates with `approval.approvers` from an attacker's side, through plain SQL (what the dashboard,
 * MCP and `stepd approve` end up writing): a client role that is not an approver, or that names an
 * approver it may not act as (config `clients`), can neither approve nor reject; the gate waits
 * again with approval_refused and nothing after it runs. An approver it may act as can.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientInsert, getSteps, securityEnv, waitFor, waitForStep, waitForWorkflow, type SecurityEnv } from './helpers.js';

const FLOW = {
  start: 'approve',
  steps: {
    approve: { approval: { approvers: ['james', 'finance-*'] }, next: 'pay' },
    pay: { tool: 'probe.whoami', done: true, output: '{{result}}' },
  },
};

async function readyAndWaitForRefusal(env: SecurityEnv, id: string, set: { result?: unknown; readiedBy?: string | null }): Promise<unknown> {
  const gate = await waitForStep(env.t, id, 'approve', 'pending');
  const updated = await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = $2, readied_by = $3 WHERE id = $1 AND status = 'pending' RETURNING id`, [
    gate.id,
    set.result === undefined ? null : JSON.stringify(set.result),
    set.readiedBy ?? null,
  ]);
  expect(updated).toHaveLength(1);
  const back = await waitFor(async () => {
    const [row] = await env.t.q(`SELECT status, error, result, readied_by FROM stepd.workflow_steps WHERE id = $1`, [gate.id]);
    return row.status === 'pending' && row.error ? row : undefined;
  }, 'the readying to be refused');
  expect(back.error).toMatchObject({ code: 'approval_refused' });
  expect(back.result).toBeNull();
  return back.error;
}

describe('a gate with approvers', () => {
  it('refuses a client role that approves or rejects as itself, or as an approver it may not act as; nothing after the gate runs', async () => {
    const env = await securityEnv({ config: { clients: {} } });
    const id = await clientInsert(env.client, FLOW);
    await readyAndWaitForRefusal(env, id, {});
    await readyAndWaitForRefusal(env, id, { readiedBy: 'james' });
    await readyAndWaitForRefusal(env, id, { readiedBy: 'finance-bob', result: { approved: false, reason: 'no' } });
    await readyAndWaitForRefusal(env, id, { readiedBy: 'james', result: { approved: false } });
    const wf = await waitForWorkflow(env.t, id, ['running']);
    expect(wf.status).toBe('running');
    expect((await getSteps(env.t, id)).map((s) => s.name)).toEqual(['approve']);
    expect(env.probe.callsOf(id)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('lets a role approve as an approver its actAs patterns cover', async () => {
    const role = `atk_${randomBytes(5).toString('hex')}`;
    const env = await securityEnv({ clientName: role, config: { clients: { [role]: { actAs: ['finance-*'] } } } });
    const id = await clientInsert(env.client, FLOW, { user: 'finance-ops' });
    await readyAndWaitForRefusal(env, id, { readiedBy: 'james' });
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', readied_by = 'finance-bob' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ user: 'finance-ops' });
    await env.bystander.assertUndisturbedAndServed();
  });
});
