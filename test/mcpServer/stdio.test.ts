import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { CLI, childEnv, envFor, runCli } from '../cli/helpers.js';
import { waitingOrder } from '../cli/signalWaitRow.js';
import { createTestSchema, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { CORE_ONLY_CONFIG, GATED_FLOW, approversRefuse, call, forbiddenToolRefused, gatedWorkflowApprovedAs, ok, toolIssuesRefused } from './scenario.js';

/** `stepd mcp --user USER` as a child process, with the SDK's Client on its stdio. */
async function connect(t: TestSchema, args: string[], env: Record<string, string> = {}): Promise<Client> {
  const cwd = tempDirSync('stepd-mcp-');
  writeFileSync(path.join(cwd, 'stepd.config.json'), JSON.stringify(CORE_ONLY_CONFIG));
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', ...args], cwd, env: childEnv({ ...envFor(t), ...env }) as Record<string, string>, stderr: 'pipe' });
  const client = new Client({ name: 'stepd-test', version: '1.0.0' });
  await client.connect(transport);
  onCleanup(() => client.close());
  return client;
}

describe('stepd mcp (stdio)', () => {
  it('starts a gated workflow as the --user, finds the gate, approves it and sees it complete with readied_by = that user', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const client = await connect(t, ['--user', 'alice']);
    await gatedWorkflowApprovedAs(client, t, 'alice');
  });

  it('refuses a flow calling a tool the user may not call (config permissions)', async () => {
    const t = await createTestSchema();
    const client = await connect(t, ['--user', 'alice']);
    await forbiddenToolRefused(client, t, 'alice');
    const tools = await ok(client, 'list_tools');
    const byName = new Map((tools.tools as { name: string; allowed: boolean }[]).map((x) => [x.name, x.allowed]));
    expect(byName.get('core.echo')).toBe(true);
    // list_tools shows only what the caller may call.
    expect(byName.has('http.request')).toBe(false);
  });

  it('refuses an unknown tool (core.ehco) and literal arguments its schema refuses before insert, as stepd validate', async () => {
    const t = await createTestSchema();
    await toolIssuesRefused(await connect(t, ['--user', 'alice']), t);
  });

  it('refuses an approval by a user the gate\'s approvers exclude', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await approversRefuse(await connect(t, ['--user', 'alice']), 'alice');
  });

  it('notifies a subscribed workflow resource as it moves, and that the list of running workflows changed', async () => {
    const t = await createTestSchema();
    const client = await connect(t, ['--user', 'alice']);
    const updates: string[] = [];
    let listChanged = 0;
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(String(n.params.uri));
    });
    client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
      listChanged++;
    });
    const { workflowId } = await ok(client, 'start_workflow', { name: 'release', flow: GATED_FLOW, input: { version: '3' } });
    const uri = `stepd://workflows/${workflowId}`;
    await client.subscribeResource({ uri });
    // The daemon starts after the subscription, so every event of this workflow comes after it.
    await startExecutor(t);
    await waitFor(() => updates.includes(uri), 'a resources/updated notification');
    await waitFor(() => listChanged > 0, 'a resources/list_changed notification');
    const gate = await waitFor(async () => ((await ok(client, 'get_workflow', { workflowId })).waiting as { stepId: string }[])[0], 'the gate');
    const before = updates.length;
    await client.unsubscribeResource({ uri });
    await ok(client, 'approve_step', { stepId: gate.stepId });
    await waitForWorkflow(t, String(workflowId));
    await waitFor(async () => (await ok(client, 'list_workflows', { status: 'completed' })).workflows, 'the list');
    expect(updates.length).toBe(before);
  });

  it('exits 0 when its stdin closes, and 4 with the reason when there is no database', async () => {
    const t = await createTestSchema();
    const closed = await runCli(['mcp', '--user', 'alice'], { env: envFor(t) });
    expect(closed.code).toBe(0);
    expect(closed.stdout).toBe('');
    const missing = await runCli(['mcp', '--user', 'alice'], { env: { ...envFor(t), STEPD_SCHEMA: 'no_such_schema' } });
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('has no stepd tables in schema "no_such_schema"');
  });

  it('send_signal inserts a signal stamped with the server\'s database role; a payload that is not an object is refused and inserts nothing', async () => {
    const t = await createTestSchema();
    const client = await connect(t, ['--user', 'alice']);
    const sent = await ok(client, 'send_signal', { name: 'payment.received', key: 'order-42', payload: { amount: 1200 } });
    expect(sent).toMatchObject({ name: 'payment.received', key: 'order-42', payload: { amount: 1200 }, createdRole: 'postgres' });
    const rows = await t.q(`SELECT id::text, name, key, payload, created_role FROM stepd.signals`);
    expect(rows).toEqual([{ id: sent.signalId, name: 'payment.received', key: 'order-42', payload: { amount: 1200 }, created_role: 'postgres' }]);
    const notObject = await call(client, 'send_signal', { name: 'payment.received', payload: [1, 2] });
    expect(notObject.isError).toBe(true);
    const noName = await call(client, 'send_signal', { name: '  ' });
    expect(noName).toMatchObject({ isError: true, content: [{ text: 'the signal name must not be empty; no signal was sent' }] });
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.signals`)).toEqual([{ n: 1 }]);
  });

  it('get_workflow lists a step waiting for a signal under signals, not as a gate, and approve_step refuses it', async () => {
    const t = await createTestSchema();
    const { workflowId, stepId, since } = await waitingOrder(t);
    const client = await connect(t, ['--user', 'alice']);
    const details = await ok(client, 'get_workflow', { workflowId });
    expect(details.waiting).toEqual([]);
    expect(details.signals).toEqual([{ stepId, name: 'await_payment', names: ['payment.received'], key: 'order-42', since, expiresAt: expect.any(String), send: 'stepd signal payment.received --key order-42' }]);
    const refused = await call(client, 'approve_step', { stepId });
    expect(refused).toMatchObject({ isError: true, structuredContent: { error: { code: 'refused' } } });
    expect(refused.content[0]?.text).toContain(`step ${stepId} (await_payment) is not a gate: it waits for signal payment.received (key order-42)`);
    expect(await t.q(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [stepId])).toEqual([{ status: 'pending' }]);
  });

  it('takes the user from STEPD_USER without --user, and answers invalid flows with their issues', async () => {
    const t = await createTestSchema();
    const client = await connect(t, [], { STEPD_USER: 'carol' });
    const started = await ok(client, 'start_workflow', { name: 'x', flow: { start: 'a', steps: { a: { tool: 'core.echo', args: {} } } } });
    expect((await t.q('SELECT created_by FROM stepd.workflows WHERE id = $1', [started.workflowId]))[0]).toEqual({ created_by: 'carol' });
    const byNumber = await ok(client, 'get_workflow', { workflowId: Number(started.workflowId) });
    expect(byNumber).toMatchObject({ workflow: { id: started.workflowId } });
    const badId = await call(client, 'get_workflow', { workflowId: 'seven' });
    expect(badId).toMatchObject({ isError: true, content: [{ text: 'workflow id must be a positive whole number (got "seven")' }] });
    const invalid = await call(client, 'validate_flow', { flow: { start: 'missing', steps: {} } });
    expect(invalid.isError).toBeFalsy();
    expect(invalid.structuredContent).toMatchObject({ valid: false });
    const notStarted = await call(client, 'start_workflow', { name: 'bad', flow: { start: 'missing', steps: {} } });
    expect(notStarted.isError).toBe(true);
    expect(notStarted.content[0]?.text).toMatch(/^the flow is not a valid flow \(\d+ issue\(s\)\); nothing was started:\n {2}/);
  });
});
