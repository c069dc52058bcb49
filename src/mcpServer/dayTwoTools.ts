/**
 * The MCP tools of day-two operations: fork_workflow, cancel_workflows and retry_workflows
 * (docs/operations.md). Registered by createMcpServer beside the others, with its `run`.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { MAX_BULK_LIMIT } from '../api/bulkActions.js';
import type { Operations } from '../api/operations.js';

export const DAY_TWO_TOOL_NAMES = ['fork_workflow', 'cancel_workflows', 'retry_workflows'] as const;

type Run = (tool: (typeof DAY_TWO_TOOL_NAMES)[number], fn: () => Promise<object>) => Promise<CallToolResult>;

const filter = (statuses: string) => ({
  name: z.string().min(1).optional().describe('only workflows of this name'),
  status: z.string().min(1).optional().describe(`only workflows in this status (${statuses})`),
  user: z.string().min(1).optional().describe('only workflows run as this user (yours unless you are an admin)'),
  since: z.string().min(1).optional().describe('only workflows created since this ISO time, or this long ago ("2h")'),
  limit: z.number().int().min(1).max(MAX_BULK_LIMIT).optional().describe('at most this many, oldest first (default 1000)'),
  dryRun: z.boolean().optional().describe('list what would change, change nothing'),
});

export function registerDayTwoTools(server: McpServer, ops: Operations, user: string, run: Run): void {
  server.registerTool(
    'fork_workflow',
    {
      title: 'Fork a workflow from a step',
      description:
        'Start a new workflow with the same frozen flow as an existing one (any status), keeping the recorded results of the steps before fromStep and running from fromStep; ' +
        'results replaces some of those results (e.g. a corrected value), input the workflow input. Your own workflows only (or any, for an admin); a gate\'s result only if you may approve it. ' +
        'Returns {workflowId, forkedFrom, fromStep, name}.',
      inputSchema: {
        workflowId: z.union([z.string().min(1), z.number().int().positive()]).describe('the workflow to fork'),
        fromStep: z.string().min(1).optional().describe('the step to run from (default: the start); it must have run at the top level'),
        input: z.record(z.string(), z.unknown()).optional().describe("the fork's input (default: the source's)"),
        results: z.record(z.string(), z.unknown()).optional().describe('{"step": result}: results of steps before fromStep to use instead of the recorded ones'),
      },
    },
    (args) => run('fork_workflow', () => ops.forkWorkflow(user, args)),
  );
  server.registerTool(
    'cancel_workflows',
    {
      title: 'Cancel workflows by filter',
      description: 'Cancel every new or running top-level workflow a filter picks (at least one of name, status, user, since), yours only unless you are an admin; dryRun lists them instead. Returns {action, dryRun, workflows}.',
      inputSchema: filter('new or running'),
      annotations: { destructiveHint: true },
    },
    (args) => run('cancel_workflows', () => ops.bulkWorkflows(user, { action: 'cancel', ...args })),
  );
  server.registerTool(
    'retry_workflows',
    {
      title: 'Retry failed workflows by filter',
      description: 'Redrive every failed top-level workflow a filter picks (at least one of name, user, since), yours only unless you are an admin; dryRun lists them instead. The daemon may still refuse some (see get_workflow). Returns {action, dryRun, workflows}.',
      inputSchema: filter('failed'),
    },
    (args) => run('retry_workflows', () => ops.bulkWorkflows(user, { action: 'retry', ...args })),
  );
}
