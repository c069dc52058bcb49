/**
 * What every MCP transport test proves, through the SDK's Client: the tools are listed, a gated
 * workflow started by the MCP user waits, get_workflow shows the gate, approve_step readies it as
 * that user, and the workflow completes; a forbidden tool or a gate's approvers refuse the user.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { expect } from 'vitest';
import { getSteps, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

export const GATED_FLOW = {
  start: 'review',
  steps: {
    review: { description: 'Ship the release?', approval: true, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: '{{input.version}}' } },
  },
};

export const FORBIDDEN_FLOW = { start: 'get', steps: { get: { tool: 'http.request', args: { url: 'https://example.com' } } } };

export const APPROVERS_FLOW = {
  start: 'review',
  steps: { review: { approval: { approvers: ['someone-else'] }, next: 'ship' }, ship: { tool: 'core.echo', args: {} } },
};

/** A config where every user may call core.* only. */
export const CORE_ONLY_CONFIG = { permissions: { default: ['core.*'] } };

type ToolResult = { isError?: boolean; structuredContent?: Record<string, unknown>; content: { type: string; text?: string }[] };

export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

export async function ok(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const result = await call(client, name, args);
  if (result.isError) throw new Error(`${name} failed: ${result.content[0]?.text}`);
  expect(result.content[0]?.type).toBe('text');
  return result.structuredContent!;
}

export async function gatedWorkflowApprovedAs(client: Client, t: TestSchema, user: string): Promise<void> {
  const listed = await client.listTools();
  expect(listed.tools.map((tool) => tool.name).sort()).toEqual(
    ['approve_step', 'cancel_workflow', 'cancel_workflows', 'fork_workflow', 'get_workflow', 'list_flows', 'list_schedules', 'list_tools', 'list_workflows', 'reject_step', 'retry_workflow', 'retry_workflows', 'send_signal', 'start_workflow', 'validate_flow'],
  );

  const started = await ok(client, 'start_workflow', { name: 'release', flow: GATED_FLOW, input: { version: '1.2' } });
  expect(started).toMatchObject({ name: 'release', created: true });
  const workflowId = started.workflowId as string;
  expect(typeof workflowId).toBe('string');

  const gate = await waitFor(async () => {
    const wf = await ok(client, 'get_workflow', { workflowId });
    return (wf.waiting as { stepId: string; name: string; message?: string }[])[0];
  }, 'the gate to wait');
  expect(gate).toMatchObject({ name: 'review', message: 'Ship the release?' });

  const approved = await ok(client, 'approve_step', { stepId: gate.stepId });
  expect(approved).toMatchObject({ stepId: gate.stepId, workflowId, readiedBy: user });

  const wf = await waitForWorkflow(t, workflowId);
  expect(wf).toMatchObject({ status: 'completed', created_by: user, output: { shipped: '1.2' } });
  expect((await getSteps(t, workflowId)).find((s) => s.name === 'review')?.readied_by).toBe(user);
  const after = await ok(client, 'get_workflow', { workflowId });
  expect(after).toMatchObject({ workflow: { id: workflowId, status: 'completed' }, waiting: [] });

  const again = await call(client, 'approve_step', { stepId: gate.stepId });
  expect(again.isError).toBe(true);
  expect(again.content[0]?.text).toMatch(/^step \d+ \(review, workflow \d+\) is done; only a pending step can be approved$/);
  expect(again.structuredContent).toMatchObject({ error: { code: 'refused' } });
}

export async function forbiddenToolRefused(client: Client, t: TestSchema, user: string): Promise<void> {
  const refused = await call(client, 'start_workflow', { name: 'fetch', flow: FORBIDDEN_FLOW });
  expect(refused.isError).toBe(true);
  expect(refused.content[0]?.text).toBe(`user "${user}" may not call tool "http.request"; nothing was started`);
  expect(refused.structuredContent).toMatchObject({ error: { code: 'permission_denied' } });
  expect(await t.q(`SELECT id FROM stepd.workflows WHERE name = 'fetch'`)).toEqual([]);
}

export async function approversRefuse(client: Client, user: string): Promise<void> {
  const { workflowId } = await ok(client, 'start_workflow', { name: 'guarded', flow: APPROVERS_FLOW });
  const gate = await waitFor(async () => ((await ok(client, 'get_workflow', { workflowId })).waiting as { stepId: string }[])[0], 'the gate to wait');
  const refused = await call(client, 'approve_step', { stepId: gate.stepId });
  expect(refused.isError).toBe(true);
  expect(refused.content[0]?.text).toMatch(new RegExp(`^user "${user}" may not approve step \\d+ \\(review, workflow \\d+\\): its approvers are someone-else$`));
}

export const TYPO_FLOW = { start: 'say', steps: { say: { tool: 'core.ehco', args: { hi: 1 } } } };
export const BAD_ARGS_FLOW = { start: 'nap', steps: { nap: { tool: 'core.sleep', args: { ms: 'soon' } } } };

/** start_workflow and validate_flow refuse an unknown tool and a literal argument its schema refuses, as stepd validate does; nothing is stored. */
export async function toolIssuesRefused(client: Client, t: TestSchema): Promise<void> {
  const typo = await call(client, 'start_workflow', { name: 'typo', flow: TYPO_FLOW });
  expect(typo.isError).toBe(true);
  expect(typo.structuredContent).toMatchObject({ error: { code: 'invalid_flow' } });
  expect(typo.content[0]?.text).toContain('steps.say.tool: unknown tool "core.ehco": the built-in "core" tools are core.echo');
  const badArgs = await call(client, 'start_workflow', { name: 'typo', flow: BAD_ARGS_FLOW });
  expect(badArgs.isError).toBe(true);
  expect(badArgs.content[0]?.text).toContain('steps.nap.args');
  expect(await t.q(`SELECT id FROM stepd.workflows WHERE name = 'typo'`)).toEqual([]);

  const checked = await ok(client, 'validate_flow', { flow: TYPO_FLOW });
  expect(checked).toMatchObject({ valid: false, issues: [{ path: 'steps.say.tool', message: expect.stringContaining('unknown tool "core.ehco"') }] });
  expect(await ok(client, 'validate_flow', { flow: BAD_ARGS_FLOW })).toMatchObject({ valid: false, issues: [{ path: expect.stringMatching(/^steps\.nap\.args/) }] });
  expect(await ok(client, 'validate_flow', { flow: GATED_FLOW })).toMatchObject({ valid: true, steps: 2 });
}
