/**
 * The honest SQL contract (DESIGN.md section 1) still works for a non-superuser role that holds
 * only `<schema>_client`: insert a workflow (with and without an idempotency key), read both
 * tables, approve a gate with a result, reject one, cancel, delete a finished workflow.
 */
import { describe, expect, it } from 'vitest';
import { clientInsert, getWorkflow, securityEnv, waitForStep, waitForWorkflow } from './helpers.js';

const ECHO_FLOW = { start: 'a', steps: { a: { tool: 'core.echo', args: { topic: '{{input.topic}}' }, done: true, output: '{{result}}' } } };
const GATE_FLOW = {
  start: 'approve',
  steps: { approve: { approval: true, next: 'after' }, after: { tool: 'core.echo', args: { decision: '{{steps.approve.result}}' }, done: true, output: '{{result}}' } },
};

describe('the honest contract as the client role', () => {
  it('inserts a workflow that the executor runs, and reads both tables', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, ECHO_FLOW, { input: { topic: 'AI safety' } });
    await waitForWorkflow(env.t, id);
    const [wf] = await env.client.q(`SELECT status, output, error FROM stepd.workflows WHERE id = $1`, [id]);
    expect(wf).toEqual({ status: 'completed', output: { topic: 'AI safety' }, error: null });
    const steps = await env.client.q(`SELECT name, status, attempt, result, error FROM stepd.workflow_steps WHERE workflow_id = $1 ORDER BY id`, [id]);
    expect(steps).toEqual([{ name: 'a', status: 'done', attempt: 1, result: { topic: 'AI safety' }, error: null }]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('deduplicates inserts by key with ON CONFLICT (key) DO NOTHING', async () => {
    const env = await securityEnv();
    const insert = () =>
      env.client.q(`INSERT INTO stepd.workflows (name, flow, input, created_by, key) VALUES ('once', $1, '{"topic": "once"}', NULL, 'order-42') ON CONFLICT (key) DO NOTHING RETURNING id`, [
        JSON.stringify(ECHO_FLOW),
      ]);
    const first = await insert();
    const second = await insert();
    expect([first.length, second.length]).toEqual([1, 0]);
    expect((await waitForWorkflow(env.t, first[0].id)).status).toBe('completed');
    expect(await env.client.q(`SELECT count(*)::int AS n FROM stepd.workflows WHERE key = 'order-42'`)).toEqual([{ n: 1 }]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('approves a pending gate with a result', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    const updated = await env.client.q(
      `UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true, "budget": 500}' WHERE id = $1 AND status = 'pending' RETURNING id`,
      [gate.id],
    );
    expect(updated).toHaveLength(1);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ decision: { approved: true, budget: 500 } });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('approves a pending gate without a result', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    expect((await waitForWorkflow(env.t, id)).output).toEqual({ decision: { approved: true } });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('rejects a pending gate', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE_FLOW);
    const gate = await waitForStep(env.t, id, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false, "reason": "too costly"}' WHERE id = $1 AND status = 'pending'`, [
      gate.id,
    ]);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'rejected', message: expect.stringContaining('too costly') });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('cancels a new workflow and a running one, whose running step is cancelled too', async () => {
    const env = await securityEnv();
    const running = await clientInsert(env.client, { start: 's', steps: { s: { tool: 'core.sleep', args: { ms: 600_000 }, timeout: '20m' } } });
    await waitForStep(env.t, running, 's', 'running');
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [running]);
    expect(await getWorkflow(env.t, running)).toMatchObject({ status: 'cancelled', cancelled_at: expect.any(Date) });
    const steps = await env.client.q(`SELECT status FROM stepd.workflow_steps WHERE workflow_id = $1`, [running]);
    expect(steps).toEqual([{ status: 'cancelled' }]);
    // A new one: cancelled in the same transaction it was inserted in, so it never runs.
    const fresh = await env.client.session(async (run) => {
      await run('BEGIN');
      const [row] = await run(`INSERT INTO stepd.workflows (name, flow) VALUES ('later', $1) RETURNING id`, [JSON.stringify(ECHO_FLOW)]);
      await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [row.id]);
      await run('COMMIT');
      return row.id as string;
    });
    expect((await getWorkflow(env.t, fresh)).status).toBe('cancelled');
    await env.bystander.assertUndisturbedAndServed();
    expect(await env.client.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1`, [fresh])).toEqual([{ n: 0 }]);
  });

  it('deletes finished workflows (completed, failed, cancelled) together with their steps, through delete_workflows', async () => {
    const env = await securityEnv();
    const completed = await clientInsert(env.client, ECHO_FLOW, { input: { topic: 'x' } });
    const failed = await clientInsert(env.client, { start: 'f', steps: { f: { tool: 'core.fail', args: { message: 'no' } } } });
    const cancelled = await clientInsert(env.client, GATE_FLOW);
    await waitForStep(env.t, cancelled, 'approve', 'pending');
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [cancelled]);
    const ids = [completed, failed, cancelled];
    for (const id of ids) await waitForWorkflow(env.t, id);
    const deleted = await env.client.q(`SELECT id FROM stepd.delete_workflows($1::bigint[]) AS id`, [ids]);
    expect(deleted.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(await env.t.q(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = ANY($1::bigint[])`, [ids])).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});
