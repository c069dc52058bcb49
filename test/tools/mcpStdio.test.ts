import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { StdioServerConfig } from '../../src/configFile.js';
import { StepTimeoutError } from '../../src/errors.js';
import { createMcpProviders, McpServerProvider } from '../../src/tools/mcp/index.js';
import { isAlive, readEvents, rejectionOf, silentLogger, stepContext, waitFor } from './helpers.js';
import { tempDirSync } from '../helpers/isolation.js';

const serverFile = fileURLToPath(new URL('../mcp-servers/stdio-server.ts', import.meta.url));
const providers: McpServerProvider[] = [];
const pids = new Set<number>();

function stdioProvider(options: { idleMs?: number; config?: Partial<StdioServerConfig> } = {}) {
  const log = join(tempDirSync('stepd-mcp-'), 'events.jsonl');
  const config: StdioServerConfig = { command: process.execPath, args: [serverFile], env: { STEPD_TEST_LOG: log }, ...options.config };
  const [provider] = createMcpProviders({ kb: config }, { log: silentLogger(), idleMs: options.idleMs ?? 60_000 });
  if (!provider) throw new Error('no provider');
  providers.push(provider);
  const events = () => {
    const all = readEvents(log);
    for (const e of all) if (e.event === 'start') pids.add(e.pid);
    return all;
  };
  return { provider, events, starts: () => events().filter((e) => e.event === 'start') };
}

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  for (const pid of pids) await waitFor(() => !isAlive(pid), `test server ${pid} to exit`);
  pids.clear();
});

describe('MCP tools over stdio', () => {
  it('returns structuredContent as the result', async () => {
    const { provider } = stdioProvider();
    expect(await provider.call('echo', { topic: 'AI', n: [1, 2] }, stepContext())).toEqual({ topic: 'AI', n: [1, 2] });
  });

  it('parses JSON text, keeps other text, and joins text parts', async () => {
    const { provider } = stdioProvider();
    expect(await provider.call('text', { text: '{"hits":[{"id":1}]}' }, stepContext())).toEqual({ hits: [{ id: 1 }] });
    expect(await provider.call('text', { text: 'just words' }, stepContext())).toBe('just words');
    expect(await provider.call('text', { parts: ['first', 'second'] }, stepContext())).toBe('first\nsecond');
  });

  it('fails isError results with the tool message, not retryable', async () => {
    const { provider } = stdioProvider();
    const err = await rejectionOf(provider.call('fail', { message: 'quota exhausted' }, stepContext()));
    expect(err).toMatchObject({ code: 'tool_error', message: 'quota exhausted', retryable: false });
  });

  it('sends the step identity in _meta', async () => {
    const { provider, events } = stdioProvider();
    const ctx = stepContext({ workflowId: '42', stepId: '99', stepName: 'search', attempt: 3, user: 'james', idempotencyKey: '42:search:99' });
    const result = await provider.call('meta', {}, ctx);
    // The SDK adds the call's progressToken (a number) beside stepd's fields.
    const meta = { workflowId: '42', stepId: '99', stepName: 'search', attempt: 3, user: 'james', idempotencyKey: '42:search:99', progressToken: expect.any(Number) };
    expect(result).toEqual({ meta });
    expect(events().find((e) => e.tool === 'meta')?.meta).toEqual(meta);
  });

  it('names the tools that exist when a tool is unknown', async () => {
    const { provider } = stdioProvider();
    const err = await rejectionOf(provider.call('serch', {}, stepContext()));
    expect(err).toMatchObject({ code: 'unknown_tool', retryable: false });
    expect(err.message).toContain('"kb.serch"');
    expect(err.message).toContain('kb.echo');
    expect(err.message).toContain('kb.sleep');
  });

  it('lists tools with description and input schema, and probes', async () => {
    const { provider } = stdioProvider();
    const tools = await provider.list();
    expect(tools.find((t) => t.name === 'sleep')).toMatchObject({ description: expect.stringContaining('Waits'), inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } });
    const probe = await provider.probe();
    expect(probe.ok).toBe(true);
    expect(probe.tools?.map((t) => t.name)).toContain('echo');
  });

  it('reports a server that cannot start, retryably, and probe says why', async () => {
    const { provider } = stdioProvider({ config: { command: join(tmpdir(), 'no-such-mcp-server') } });
    const err = await rejectionOf(provider.call('echo', {}, stepContext()));
    expect(err).toMatchObject({ code: 'mcp_unavailable', retryable: true });
    const probe = await provider.probe();
    expect(probe).toMatchObject({ ok: false, error: expect.stringContaining('could not be reached') });
  });

  it('shares one connection between concurrent calls', async () => {
    const { provider, starts } = stdioProvider();
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => provider.call('echo', { i }, stepContext())));
    expect(results).toEqual(Array.from({ length: 6 }, (_, i) => ({ i })));
    expect(starts()).toHaveLength(1);
  });

  it('passes env over the safe default environment, and cwd', async () => {
    const cwd = realpathSync(tempDirSync('stepd-cwd-'));
    const log = join(cwd, 'events.jsonl');
    const { provider } = stdioProvider({ config: { env: { STEPD_TEST_LOG: log, STEPD_TEST_MARK: 'marked' }, cwd } });
    await provider.call('echo', {}, stepContext());
    const [start] = readEvents(log);
    if (start) pids.add(start.pid);
    expect(start).toMatchObject({ event: 'start', env: { STEPD_TEST_MARK: 'marked' }, cwd });
  });

  it("cancels the server's work when the step's signal aborts", async () => {
    const { provider, events } = stdioProvider();
    const controller = new AbortController();
    const call = provider.call('sleep', { ms: 60_000 }, stepContext({ signal: controller.signal }));
    await waitFor(() => events().some((e) => e.tool === 'sleep' && e.event === 'call'), 'the sleep call to start');
    controller.abort(new StepTimeoutError(50));
    expect(await rejectionOf(call)).toBeInstanceOf(StepTimeoutError);
    await waitFor(() => events().some((e) => e.event === 'cancelled'), 'the server to record the cancellation');
    // The connection survives a cancelled call.
    expect(await provider.call('echo', { after: true }, stepContext())).toEqual({ after: true });
  });

  it('fails the call hit by a killed server retryably, and the next call reconnects', async () => {
    const { provider, events, starts } = stdioProvider();
    const call = provider.call('sleep', { ms: 60_000 }, stepContext());
    const running = await waitFor(() => events().find((e) => e.tool === 'sleep'), 'the sleep call to start');
    process.kill(running.pid, 'SIGKILL');
    expect(await rejectionOf(call)).toMatchObject({ code: 'mcp_transport', retryable: true });
    expect(await provider.call('echo', { again: 1 }, stepContext())).toEqual({ again: 1 });
    const [first, second] = starts();
    expect(second?.pid).toBeDefined();
    expect(second?.pid).not.toBe(first?.pid);
  });

  it('recovers from a server that exits in the middle of a call', async () => {
    const { provider, events, starts } = stdioProvider();
    expect(await rejectionOf(provider.call('crash', {}, stepContext()))).toMatchObject({ code: 'mcp_transport', retryable: true });
    expect(events().some((e) => e.event === 'crash')).toBe(true);
    expect(await provider.call('echo', { ok: 1 }, stepContext())).toEqual({ ok: 1 });
    expect(starts()).toHaveLength(2);
  });

  it('closes an idle connection and reopens it on the next call', async () => {
    const { provider, starts } = stdioProvider({ idleMs: 20 });
    await provider.call('echo', {}, stepContext());
    const [first] = starts();
    await waitFor(() => !provider.connected, 'the idle connection to close');
    await waitFor(() => first && !isAlive(first.pid), 'the idle server process to exit');
    await provider.call('echo', {}, stepContext());
    expect(starts()).toHaveLength(2);
  });

  it('stops the server on close and refuses later calls', async () => {
    const { provider, starts } = stdioProvider();
    await provider.call('echo', {}, stepContext());
    await provider.close();
    const [first] = starts();
    await waitFor(() => first && !isAlive(first.pid), 'the server process to exit');
    expect(await rejectionOf(provider.call('echo', {}, stepContext()))).toMatchObject({ code: 'mcp_closed', retryable: true });
  });

  it('refuses non-object arguments and respects an already aborted signal', async () => {
    const { provider, starts } = stdioProvider();
    expect(await rejectionOf(provider.call('echo', [1], stepContext()))).toMatchObject({ code: 'bad_args', retryable: false });
    const controller = new AbortController();
    controller.abort();
    expect(await rejectionOf(provider.call('echo', {}, stepContext({ signal: controller.signal })))).toMatchObject({ code: 'aborted' });
    expect(starts()).toHaveLength(0);
  });
});
