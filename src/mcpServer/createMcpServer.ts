/**
 * stepd's workflow operations as MCP tools, for agents: one McpServer per caller, every tool
 * acting as `user` through src/api/operations.ts (the SQL contract, that user's permissions).
 * Results are `structuredContent` plus a text rendering; refusals are tool errors (`isError`)
 * with the CLI's wording and `structuredContent.error = {code, message, details?}`.
 * The same server is served on stdio (`stepd mcp`) and over Streamable HTTP (createMcpHttpHandler).
 */
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { MAX_LIST_LIMIT, WORKFLOW_STATUSES, toOperationError, type Operations } from '../api/operations.js';
import type { Logger } from '../logger.js';
import { render } from './render.js';
import { DAY_TWO_TOOL_NAMES, registerDayTwoTools } from './dayTwoTools.js';

export const STEPD_MCP_SERVER_NAME = 'stepd';

export interface McpServerOptions {
  /** The version announced to clients. */
  version?: string;
  log?: Logger;
}

/** Ids are strings of digits (bigints); a whole number is taken too, as agents often send one. */
const id = (what: string) =>
  z.union([z.string().min(1), z.number().int().positive()]).describe(`the ${what} id: a string of digits, as the other tools return it`);
const flowArg = z
  .union([z.record(z.string(), z.unknown()), z.string()])
  .describe('the flow JSON: {"start": "first", "steps": {"first": {"tool": "core.echo", "args": {...}, "next": "..."}, ...}} (or its text)');

export const TOOL_NAMES = [
  'start_workflow',
  'get_workflow',
  'list_workflows',
  'approve_step',
  'reject_step',
  'cancel_workflow',
  'retry_workflow',
  'send_signal',
  'validate_flow',
  'list_flows',
  'list_schedules',
  'list_tools',
  ...DAY_TWO_TOOL_NAMES,
] as const;

export function createMcpServer(ops: Operations, user: string, options: McpServerOptions = {}): McpServer {
  const server = new McpServer(
    { name: STEPD_MCP_SERVER_NAME, version: options.version ?? '0.1.0' },
    {
      instructions:
        `stepd runs multi-step workflows (flows of tool calls, branches, fan-outs and approval gates) stored in PostgreSQL. ` +
        `You act as user "${user}": workflows you start run as that user, with that user's tool permissions, and approvals are recorded under that name. ` +
        'Typical use: validate_flow, then start_workflow; poll get_workflow until its status is completed, failed or cancelled; ' +
        'a gate waiting for approval appears in get_workflow.waiting with its stepId: approve_step or reject_step it; ' +
        'a step waiting for a signal appears in get_workflow.signals (names, key, since): send_signal moves it on.',
    },
  );
  const log = options.log;

  /**
   * Runs an operation and shapes its answer (or its refusal) as a tool result. The tools declare
   * no outputSchema on purpose: the SDK's Client checks even an error's structuredContent against
   * it, and a refusal's `{error: {code, message}}` is worth more to an agent than the declaration.
   */
  const run = async <T extends object>(tool: (typeof TOOL_NAMES)[number], fn: () => Promise<T> | T): Promise<CallToolResult> => {
    const started = Date.now();
    try {
      const result = await fn();
      log?.debug({ tool, user, ms: Date.now() - started }, 'mcp tool call');
      return { content: [{ type: 'text', text: render(tool, result) }], structuredContent: result as Record<string, unknown> };
    } catch (err) {
      const error = toOperationError(err);
      // Refusals are answers, not failures of stepd: only what an operator must look at is a warning.
      if (error.code === 'internal' || error.code === 'unavailable') log?.warn({ err, tool, user }, 'mcp tool call failed');
      else log?.debug({ tool, user, code: error.code, ms: Date.now() - started }, 'mcp tool call refused');
      const body = { code: error.code, message: error.message, ...(error.details !== undefined ? { details: error.details } : {}) };
      return { isError: true, content: [{ type: 'text', text: error.message }], structuredContent: { error: body } };
    }
  };

  server.registerTool(
    'start_workflow',
    {
      title: 'Start a workflow',
      description:
        'Start a workflow running as you. Give "flow" (the flow JSON) and a "name" for the workflow, or only the "name" of a registered flow (see list_flows; "version" picks one, default the latest); ' +
        '"input" is the JSON object its templates read as {{input.…}}. ' +
        'With "key", a workflow already started with that key is returned instead of starting another (created: false). ' +
        'Refused when the flow is invalid (the issues are listed with their paths) or calls a tool you may not call. Returns {workflowId, name, status, created}.',
      inputSchema: {
        name: z.string().min(1).describe('the workflow name (without "flow": the registered flow of that name)'),
        flow: flowArg.optional(),
        version: z.number().int().min(1).optional().describe('without "flow": this version of the registered flow (default: the latest)'),
        input: z.record(z.string(), z.unknown()).optional().describe('the workflow input, a JSON object (default {})'),
        key: z.string().min(1).optional().describe('idempotency key'),
      },
    },
    (args) => run('start_workflow', () => ops.startWorkflow(user, args)),
  );

  server.registerTool(
    'get_workflow',
    {
      title: 'Get a workflow',
      description:
        'A workflow with its status, input, output and error, every step row (attempts, results, errors, durations), "waiting": the approval gates waiting for someone, each with its stepId for approve_step / reject_step, ' +
        'and "signals": the steps waiting for a signal (names, key, since, expiresAt), which send_signal moves on (they are not gates: approve_step refuses them).',
      inputSchema: { workflowId: id('workflow') },
      annotations: { readOnlyHint: true },
    },
    (args) => run('get_workflow', () => ops.getWorkflow(user, args)),
  );

  server.registerTool(
    'list_workflows',
    {
      title: 'List workflows',
      description: 'Recent workflows, newest first, optionally only those with a status, a name or running as a user (createdBy). "waiting" counts the gates waiting for approval (sub-workflows included); "parentId" marks a sub-workflow.',
      inputSchema: {
        status: z.enum(WORKFLOW_STATUSES as [string, ...string[]]).optional(),
        name: z.string().min(1).optional(),
        createdBy: z.string().min(1).optional().describe('only workflows running as this user'),
        limit: z.number().int().min(1).max(MAX_LIST_LIMIT).optional().describe('at most this many (default 20)'),
      },
      annotations: { readOnlyHint: true },
    },
    async (args) => run('list_workflows', async () => ({ workflows: await ops.listWorkflows(user, args) })),
  );

  server.registerTool(
    'approve_step',
    {
      title: 'Approve a gate',
      description:
        'Approve a gate waiting for approval (a pending step; find it in get_workflow.waiting). Recorded as approved by you. ' +
        '"data" becomes the gate\'s result, which later steps read as {{steps.NAME.result}} (default {"approved": true}). Refused when the step is not pending or its approvers do not include you.',
      inputSchema: { stepId: id('step'), data: z.unknown().optional().describe('the gate\'s result, any JSON') },
    },
    (args) => run('approve_step', () => ops.approveStep(user, args)),
  );

  server.registerTool(
    'reject_step',
    {
      title: 'Reject a gate',
      description:
        'Reject a gate waiting for approval: its result is {"approved": false, "reason": …} and it fails with code "rejected" (the flow\'s onError decides what follows). Refused when the step is not pending or its approvers do not include you.',
      inputSchema: { stepId: id('step'), reason: z.string().optional().describe('why it was rejected') },
    },
    (args) => run('reject_step', () => ops.rejectStep(user, args)),
  );

  server.registerTool(
    'cancel_workflow',
    {
      title: 'Cancel a workflow',
      description: 'Cancel a workflow that is new or running: its live steps are cancelled and running tools aborted. Refused when it already ended.',
      inputSchema: { workflowId: id('workflow') },
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    (args) => run('cancel_workflow', () => ops.cancelWorkflow(user, args)),
  );

  server.registerTool(
    'retry_workflow',
    {
      title: 'Retry a failed workflow',
      description:
        'Redrive a failed workflow: it goes on from its failed steps with new attempts (a rejected gate waits again). Refused when the workflow did not fail or cannot be redriven (the reason is given). ' +
        'The daemon checks again when it takes the request; if it refuses, the workflow is failed again with error code "redrive_refused" (see get_workflow).',
      inputSchema: { workflowId: id('workflow') },
    },
    (args) => run('retry_workflow', () => ops.retryWorkflow(user, args)),
  );

  server.registerTool(
    'send_signal',
    {
      title: 'Send a signal',
      description:
        'Send a signal: a named message (like "payment.received") with an optional business key (like "order-42") and a JSON object payload. ' +
        'Every workflow waiting for that name (and key, when its wait names one) receives it as the result {id, name, key, payload, at, role}; ' +
        'a workflow that starts waiting later still receives it when its wait counts signals since the workflow began. ' +
        'Written by this server\'s database role (recorded as the signal\'s role). Refused when the payload is over the size caps or the role may not send signals. Returns {signalId, name, key, payload, createdAt, createdRole}.',
      inputSchema: {
        name: z.string().min(1).describe('the signal name, like "payment.received"'),
        key: z.string().min(1).optional().describe('its business key, like "order-42" (default: none)'),
        payload: z.record(z.string(), z.unknown()).optional().describe('a JSON object the waiting steps receive as result.payload (default {})'),
      },
    },
    (args) => run('send_signal', () => ops.sendSignal(user, args)),
  );

  server.registerTool(
    'validate_flow',
    {
      title: 'Validate a flow',
      description: 'Check a flow the way stepd does before running it. Returns {valid, steps?, issues: [{path, message}], warnings?}, every issue with the JSON path it is about: the flow itself, unknown tools and literal arguments the input schema of their tool refuses (the tools of MCP servers when this server has their configuration). Starts nothing.',
      inputSchema: { flow: flowArg },
      annotations: { readOnlyHint: true },
    },
    (args) => run('validate_flow', () => ops.validateFlow(user, args)),
  );

  server.registerTool(
    'list_flows',
    {
      title: 'List registered flows',
      description: 'The flows registered by name (start one with start_workflow and its name alone), each with its latest version.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    () => run('list_flows', () => ops.listFlows(user)),
  );

  server.registerTool(
    'list_schedules',
    {
      title: 'List schedules',
      description: 'The cron schedules that start registered flows (stepd schedule add), by name: cron and time zone, flow, input, the user its workflows run as, the role that wrote it, overlap and catch-up policies, paused, and the next tick (null while paused). Their workflows carry the key schedule:NAME:<tick time>.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    () => run('list_schedules', () => ops.listSchedules(user)),
  );

  server.registerTool(
    'list_tools',
    {
      title: 'List the tools flows can call',
      description: 'The tools your flow steps may call ("core.*", "http.request", the configured MCP servers\' tools) with title, description and input and output schemas; tools you may not call are left out.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    () => run('list_tools', () => ops.listTools(user)),
  );

  registerDayTwoTools(server, ops, user, run);

  // Workflows as resources too, for clients that attach context: the running ones are listed
  // (those with gates waiting first), any one can be read by id.
  server.registerResource(
    'workflow',
    new ResourceTemplate('stepd://workflows/{workflowId}', {
      list: async () => {
        const running = await ops.listWorkflows(user, { status: 'running', limit: 50 });
        running.sort((a, b) => b.waiting - a.waiting);
        return {
          resources: running.map((w) => ({
            uri: `stepd://workflows/${w.id}`,
            name: `workflow ${w.id} (${w.name})`,
            description: w.waiting > 0 ? `running, ${w.waiting} gate(s) waiting for approval` : 'running',
            mimeType: 'application/json',
          })),
        };
      },
    }),
    {
      title: 'A workflow',
      description: 'A workflow with its steps and the gates waiting for approval, as get_workflow returns it.',
      mimeType: 'application/json',
    },
    async (uri, variables) => {
      const details = await ops.getWorkflow(user, { workflowId: String(variables.workflowId) });
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(details, null, 2) }] };
    },
  );

  return server;
}
