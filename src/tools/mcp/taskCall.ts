/**
 * A tools/call as an MCP task (protocol 2025-11-25, the SDK's experimental tasks API), for tools
 * whose `execution.taskSupport` is `"required"`: the call creates a task, stepd polls `tasks/get`
 * (at the server's `pollInterval`, 100 ms to 5 s) until it ends or needs input, then reads the
 * tool's result with `tasks/result`. A task that needs input gets it through `tasks/result`: the
 * elicitation arrives there and is declined (serverRequests.ts). When the step is aborted
 * (timeout, cancellation, shutdown, the connection lost) the task is cancelled with `tasks/cancel`,
 * best effort. Progress notifications for the call's progressToken go on arriving while the task works.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { CallToolResultSchema, CreateTaskResultSchema, type CallToolResult, type Task } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { StepError } from '../../errors.js';
import { cutRemoteText, type Secrets } from '../../secrets.js';
import type { CallSite } from './results.js';

export interface TaskCallOptions {
  signal: AbortSignal;
  /** Per request (create, each poll, the result), a backstop behind the step's own timeout. */
  timeoutMs: number;
  onprogress?: RequestOptions['onprogress'];
  log: Logger;
  secrets?: Secrets;
}

const MIN_POLL_MS = 100;
const MAX_POLL_MS = 5_000;
const CANCEL_WAIT_MS = 2_000;

export async function callToolAsTask(
  client: Client,
  params: { name: string; arguments: Record<string, unknown>; _meta?: Record<string, unknown> },
  site: CallSite,
  opts: TaskCallOptions,
): Promise<CallToolResult> {
  const { signal, timeoutMs } = opts;
  const created = await client.request({ method: 'tools/call', params }, CreateTaskResultSchema, {
    signal,
    timeout: timeoutMs,
    task: {},
    ...(opts.onprogress ? { onprogress: opts.onprogress } : {}),
  });
  let task: Task = created.task;
  const log = opts.log.child({ server: site.server, tool: site.tool, taskId: task.taskId });
  log.debug({ status: task.status }, 'mcp task created');
  try {
    while (task.status === 'working') {
      await pause(clamp(task.pollInterval ?? 1_000), signal);
      task = await client.experimental.tasks.getTask(task.taskId, { signal, timeout: timeoutMs });
    }
    if (task.status === 'cancelled') {
      throw new StepError('mcp_task_cancelled', `${site.server}.${site.tool}: the server cancelled its task${statusText(task, opts.secrets)}`, {
        retryable: false,
        details: { server: site.server, tool: site.tool, taskId: task.taskId },
      });
    }
    // completed, failed (its result says why) or input_required (tasks/result delivers the request and waits).
    try {
      return await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, { signal, timeout: timeoutMs });
    } catch (err) {
      if (task.status !== 'failed' || signal.aborted) throw err;
      throw new StepError('mcp_task_failed', `${site.server}.${site.tool}: its task failed${statusText(task, opts.secrets)}`, {
        retryable: false,
        details: { server: site.server, tool: site.tool, taskId: task.taskId },
      });
    }
  } catch (err) {
    if (signal.aborted) cancelQuietly(client, task.taskId, log);
    throw err;
  }
}

function statusText(task: Task, secrets: Secrets | undefined): string {
  return task.statusMessage ? `: ${cutRemoteText(task.statusMessage, secrets, 500)}` : '';
}

function clamp(ms: number): number {
  return Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, Number.isFinite(ms) ? ms : 1_000));
}

/** The task is no longer wanted: ask the server to stop it, without waiting for the answer. */
function cancelQuietly(client: Client, taskId: string, log: Logger): void {
  client.experimental.tasks.cancelTask(taskId, { timeout: CANCEL_WAIT_MS }).then(
    () => log.info('mcp task cancelled'),
    (err: unknown) => log.debug({ error: err instanceof Error ? err.message : String(err) }, 'mcp task could not be cancelled'),
  );
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      done();
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
