/**
 * Usage and cost (sql/0030) from an attacker's side: a client role cannot write a step's or a
 * workflow's usage (with or without the executor marker, on insert or update), a superuser's
 * session without the marker is refused by the guard, and a gate readied with a result that
 * carries a `usage` records none (only a tool's report counts), so budgets cannot be forged.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startChatServer } from '../helpers/chatServer.js';
import {
  clientInsert,
  createLoginRole,
  createSecuredSchema,
  getSteps,
  getWorkflow,
  insertWorkflow,
  refused,
  schemaRoles,
  securityEnv,
  startConfiguredExecutor,
  waitForStep,
  waitForWorkflow,
} from './helpers.js';

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
    const id = await clientInsert(env.client, { start: 'ok', budget: { cost: 1 }, steps: { ok: { approval: true, done: true, output: '{{result}}' } } });
    const gate = await waitForStep(env.t, id, 'ok', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true, "usage": {"inputTokens": 5, "outputTokens": 5, "cost": 99}}' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status).toBe('completed');
    expect(wf.usage).toBeNull();
    expect((await getSteps(env.t, id))[0]!.usage).toBeNull();
  });

  it('an executor that is only a member of <schema>_executor records, sums (children included) and budgets usage', async () => {
    const t = await createSecuredSchema();
    const role = await createLoginRole(t, schemaRoles(t.schema).executor, `exe_${randomBytes(5).toString('hex')}`);
    const server = await startChatServer({ apiKey: 'sk-role-test-key-123' });
    server.answer = () => 'ok';
    const config = {
      llm: { providers: { main: { baseUrl: server.baseUrl, apiKey: 'sk-role-test-key-123', prices: { small: { input: 0, output: 100_000 } } } } },
      http: { allow: [`${new URL(server.baseUrl).origin}/`] },
    };
    await startConfiguredExecutor(t, config, { options: { databaseUrl: role.url } });
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('leaf', $1)`, [
      JSON.stringify({ start: 'ask', steps: { ask: { tool: 'llm.chat', args: { model: 'main/small', messages: [{ role: 'user', content: 'x' }] }, done: true } } }),
    ]);
    // 0.1 per child: the fourth child's call would start with its parent at 0.3, past 0.25.
    const id = await insertWorkflow(t, {
      start: 'each',
      budget: { cost: 0.25 },
      steps: { each: { forEach: { items: '{{input.items}}', step: 'kid', concurrency: 1 }, join: 'end' }, kid: { workflow: { name: 'leaf', input: {} } }, end: { tool: 'core.noop', args: {}, done: true } },
    }, { items: [1, 2, 3, 4] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'budget_exceeded', step: 'kid' });
    expect(server.requests).toHaveLength(3);
    expect(wf.usage).toEqual({ inputTokens: 3, outputTokens: 3, cost: 0.3 });
  });
});
