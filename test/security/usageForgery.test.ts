/**
 * Usage and cost (sql/0030) from an attacker's side: a client role cannot write a step's or a
 * workflow's usage (with or without the executor marker, on insert or update), a superuser's
 * session without the marker is refused by the guard, and a gate readied with a result that
 * carries a `usage` records none (only a tool's report counts), so budgets cannot be forged.
 */
import { describe, expect, it } from 'vitest';
import { clientInsert, getSteps, getWorkflow, insertWorkflow, refused, securityEnv, waitForStep, waitForWorkflow } from './helpers.js';

const USAGE = `'{"inputTokens": 1, "outputTokens": 1, "cost": 1000}'`;

describe("usage is the executor's", () => {
  it('a client writes no usage on steps or workflows, with or without the executor marker', async () => {
    const env = await securityEnv();
    const [gate] = await getSteps(env.t, env.bystander.id);
    const forgeStep = `UPDATE stepd.workflow_steps SET usage = ${USAGE} WHERE id = $1`;
    await refused(env.client.q(forgeStep, [gate!.id]), /permission denied|written by the executor only/);
    await refused(env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', usage = ${USAGE} WHERE id = $1`, [gate!.id]), /permission denied/);
    await refused(env.client.q(`INSERT INTO stepd.workflows (name, flow, usage) VALUES ('x', '{"start": "a", "steps": {"a": {"tool": "core.noop"}}}', ${USAGE})`), /permission denied/);
    const own = await clientInsert(env.client, { start: 'a', steps: { a: { tool: 'core.noop' } } });
    await refused(env.client.q(`UPDATE stepd.workflows SET usage = ${USAGE} WHERE id = $1`, [own]), /permission denied/);
    await env.client.session(async (q) => {
      await q(`SET stepd.executor = 'on'`);
      await refused(q(forgeStep, [gate!.id]), /permission denied|written by the executor only/);
      await refused(q(`UPDATE stepd.workflows SET usage = ${USAGE} WHERE id = $1`, [env.bystander.id]), /permission denied/);
    });
    // The tables' owner without the marker (a superuser's psql, the CLI) meets the guard.
    await refused(env.t.q(forgeStep, [gate!.id]), /written by the executor only|only be set to 'ready'/);
    await refused(env.t.q(`UPDATE stepd.workflow_steps SET status = 'ready', usage = ${USAGE} WHERE id = $1`, [gate!.id]), /written by the executor only/);
    await refused(env.t.q(`UPDATE stepd.workflows SET usage = ${USAGE} WHERE id = $1`, [env.bystander.id]), /written by the executor only/);
    await refused(env.t.q(`INSERT INTO stepd.workflows (name, flow, usage) VALUES ('x', '{"start": "a", "steps": {"a": {"tool": "core.noop"}}}', ${USAGE})`), /written by the executor only/);
    expect((await getSteps(env.t, env.bystander.id))[0]!.usage).toBeNull();
    expect((await getWorkflow(env.t, env.bystander.id)).usage).toBeNull();
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a gate approved with a result that carries a usage records none on the row or the workflow', async () => {
    const env = await securityEnv();
    const id = await insertWorkflow(env.t, { start: 'ok', budget: { cost: 1 }, steps: { ok: { approval: true, done: true, output: '{{result}}' } } });
    const gate = await waitForStep(env.t, id, 'ok', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true, "usage": {"inputTokens": 5, "outputTokens": 5, "cost": 99}}' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status).toBe('completed');
    expect(wf.usage).toBeNull();
    expect((await getSteps(env.t, id))[0]!.usage).toBeNull();
  });
});
