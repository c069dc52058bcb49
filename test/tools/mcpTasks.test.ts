/**
 * Tools that require task-based execution (`execution.taskSupport: "required"`) run as MCP tasks:
 * create, poll tasks/get, read tasks/result; a failed or server-cancelled task fails the step
 * with a clear code; an aborted step cancels its task (tasks/cancel). The server is a minimal
 * hand-written one whose task moves as the test tells it (server-everything's own task tool is
 * covered in test/integration/referenceServers.test.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpProviders, McpServerProvider } from '../../src/tools/mcp/index.js';
import { rejectionOf, silentLogger, stepContext, waitFor } from './helpers.js';

type Ending = 'completed' | 'failed' | 'cancelled' | 'never';

interface TaskServer {
  url: string;
  /** The JSON-RPC methods received, in order. */
  methods: string[];
  /** The task params of each tools/call. */
  taskParams: unknown[];
  close(): Promise<void>;
}

const servers: TaskServer[] = [];
const providers: McpServerProvider[] = [];

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A server with one tool, `research`, that must run as a task; the task ends as `ending` after two polls. */
async function taskServer(ending: Ending): Promise<TaskServer> {
  const methods: string[] = [];
  const taskParams: unknown[] = [];
  let polls = 0;
  let status = 'working';
  const task = () => ({ taskId: 'task-1', status, ttl: null, createdAt: '2026-01-01T00:00:00Z', lastUpdatedAt: '2026-01-01T00:00:00Z', pollInterval: 20, statusMessage: `status ${status}` });
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
      const msg = JSON.parse(body) as { id?: number; method: string; params?: { task?: unknown } };
      methods.push(msg.method);
      const headers = { 'content-type': 'application/json', 'mcp-session-id': 'tasks-1' };
      if (msg.id === undefined) return void res.writeHead(202, headers).end();
      const reply = (result: unknown) => res.writeHead(200, headers).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
      const fail = (code: number, message: string) => res.writeHead(200, headers).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code, message } }));
      switch (msg.method) {
        case 'initialize':
          return reply({ protocolVersion: '2025-11-25', capabilities: { tools: {}, tasks: { cancel: {}, requests: { tools: { call: {} } } } }, serverInfo: { name: 'tasks', version: '1' } });
        case 'tools/list':
          return reply({ tools: [{ name: 'research', inputSchema: { type: 'object' }, execution: { taskSupport: 'required' } }] });
        case 'tools/call':
          taskParams.push(msg.params?.task);
          return reply({ task: task() });
        case 'tasks/get':
          if (++polls >= 2 && ending !== 'never') status = ending;
          return reply(task());
        case 'tasks/result':
          if (status === 'completed') return reply({ content: [{ type: 'text', text: '{"report": "tides"}' }] });
          return fail(-32603, 'the research went wrong');
        case 'tasks/cancel':
          status = 'cancelled';
          return reply(task());
        default:
          return reply({});
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s: TaskServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    methods,
    taskParams,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(s);
  return s;
}

function provider(url: string): McpServerProvider {
  const [p] = createMcpProviders({ lab: { url } }, { log: silentLogger(), idleMs: 60_000 });
  if (!p) throw new Error('no provider');
  providers.push(p);
  return p;
}

describe('MCP tools that require task-based execution', () => {
  it('creates a task, polls it until it completes, and returns its result', async () => {
    const server = await taskServer('completed');
    expect(await provider(server.url).call('research', { topic: 'tides' }, stepContext())).toEqual({ report: 'tides' });
    expect(server.taskParams).toEqual([{}]);
    expect(server.methods.filter((m) => m.startsWith('tasks/') || m === 'tools/call')).toEqual(['tools/call', 'tasks/get', 'tasks/get', 'tasks/result']);
  });

  it('fails the step with mcp_task_failed and the status message when the task failed', async () => {
    const server = await taskServer('failed');
    const err = await rejectionOf(provider(server.url).call('research', {}, stepContext()));
    expect(err).toMatchObject({ code: 'mcp_task_failed', retryable: false, details: { server: 'lab', tool: 'research', taskId: 'task-1' } });
    expect(err.message).toBe('lab.research: its task failed: status failed');
  });

  it('fails the step with mcp_task_cancelled when the server cancelled the task', async () => {
    const server = await taskServer('cancelled');
    const err = await rejectionOf(provider(server.url).call('research', {}, stepContext()));
    expect(err).toMatchObject({ code: 'mcp_task_cancelled', retryable: false });
    expect(server.methods).not.toContain('tasks/result');
  });

  it('cancels the task when the step is aborted', async () => {
    const server = await taskServer('never');
    const abort = new AbortController();
    const call = rejectionOf(provider(server.url).call('research', {}, stepContext({ signal: abort.signal })));
    await waitFor(() => server.methods.includes('tasks/get'), 'the task to be polled');
    abort.abort();
    expect(await call).toMatchObject({ code: 'aborted' });
    await waitFor(() => server.methods.includes('tasks/cancel'), 'tasks/cancel');
  });
});
