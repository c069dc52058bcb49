import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import { createLimitPolicy } from '../../src/tools/limits.js';
import { createMcpProviders, McpServerProvider } from '../../src/tools/mcp/index.js';
import { startHttpMcpServer, type HttpMcpServer } from '../mcp-servers/http-server.js';
import { rejectionOf, silentLogger, stepContext, waitFor } from './helpers.js';

let server: HttpMcpServer;
const providers: McpServerProvider[] = [];

beforeEach(async () => {
  server = await startHttpMcpServer();
});

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  await server.close();
});

function httpProvider(options: { idleMs?: number; headers?: Record<string, string>; url?: string } = {}): McpServerProvider {
  const config = { url: options.url ?? server.url, ...(options.headers ? { headers: options.headers } : {}) };
  const [provider] = createMcpProviders({ search: config }, { log: silentLogger(), idleMs: options.idleMs ?? 60_000 });
  if (!provider) throw new Error('no provider');
  providers.push(provider);
  return provider;
}

describe('MCP tools over Streamable HTTP', () => {
  it('returns structured and text results and sends configured headers', async () => {
    const provider = httpProvider({ headers: { Authorization: 'Bearer s3' } });
    expect(await provider.call('echo', { q: 'x' }, stepContext())).toEqual({ q: 'x' });
    expect(await provider.call('text', { text: '[1,2]' }, stepContext())).toEqual([1, 2]);
    expect(await provider.call('text', { text: 'plain' }, stepContext())).toBe('plain');
    expect(server.stats.lastHeaders.authorization).toBe('Bearer s3');
  });

  it('fails isError results with the tool message, not retryable', async () => {
    const provider = httpProvider();
    expect(await rejectionOf(provider.call('fail', { message: 'no such document' }, stepContext()))).toMatchObject({
      code: 'tool_error',
      message: 'no such document',
      retryable: false,
    });
  });

  it('sends the step identity in _meta and names known tools for an unknown one', async () => {
    const provider = httpProvider();
    const ctx = stepContext({ workflowId: '5', stepId: '8', attempt: 2, user: null, idempotencyKey: '5:step:8' });
    expect(await provider.call('meta', {}, ctx)).toEqual({
      meta: { workflowId: '5', stepId: '8', stepName: 'step', attempt: 2, user: null, idempotencyKey: '5:step:8', progressToken: expect.any(Number) },
    });
    const err = await rejectionOf(provider.call('nope', {}, stepContext()));
    expect(err).toMatchObject({ code: 'unknown_tool', retryable: false });
    expect(err.message).toContain('search.echo');
  });

  it("cancels the server's work when the step's signal aborts", async () => {
    const provider = httpProvider();
    const controller = new AbortController();
    const call = provider.call('sleep', { ms: 60_000 }, stepContext({ signal: controller.signal }));
    await waitFor(() => server.stats.events.some((e) => e.tool === 'sleep' && e.event === 'call'), 'the sleep call to start');
    controller.abort();
    expect(await rejectionOf(call)).toMatchObject({ code: 'aborted', retryable: true });
    await waitFor(() => server.stats.events.some((e) => e.event === 'cancelled'), 'the server to record the cancellation');
  });

  it('shares one session between concurrent calls', async () => {
    const provider = httpProvider();
    await Promise.all(Array.from({ length: 5 }, (_, i) => provider.call('echo', { i }, stepContext())));
    expect(server.stats.sessionsOpened).toBe(1);
  });

  it('sends a call that hits a forgotten session (404) again on a new session, once', async () => {
    const provider = httpProvider();
    await provider.call('echo', {}, stepContext());
    await server.dropSessions();
    expect(await provider.call('echo', { back: true }, stepContext())).toEqual({ back: true });
    expect(server.stats.sessionsOpened).toBe(2);
    expect(server.stats.events.filter((e) => e.tool === 'echo' && e.event === 'call')).toHaveLength(2);
  });

  it('fails retryably while the server is down', async () => {
    const provider = httpProvider();
    await server.close();
    const err = await rejectionOf(provider.call('echo', {}, stepContext()));
    expect(err).toBeInstanceOf(StepError);
    expect(err).toMatchObject({ retryable: true });
    server = await startHttpMcpServer();
    const again = httpProvider({ url: server.url });
    expect(await again.call('echo', { up: 1 }, stepContext())).toEqual({ up: 1 });
  });

  it('ends the session after the idle period and reopens on the next call', async () => {
    const idle = httpProvider({ idleMs: 20 });
    await idle.call('echo', {}, stepContext());
    await waitFor(() => !idle.connected && server.stats.sessionsOpen === 0, 'the idle session to end');
    await idle.call('echo', {}, stepContext());
    expect(server.stats.sessionsOpened).toBe(2);
  });

  it('ends the session on close', async () => {
    const closing = httpProvider();
    await closing.call('echo', {}, stepContext());
    expect(server.stats.sessionsOpen).toBe(1);
    await closing.close();
    await waitFor(() => server.stats.sessionsOpen === 0, 'the session to end on close');
  });

  it('never runs more calls at once than a tool limit allows', async () => {
    const provider = httpProvider();
    const limits = createLimitPolicy({ tools: { 'search.concurrency': 2 } });
    // A small stand-in for the executor's claim loop: run a step only when tryAcquire grants a slot.
    const pending = Array.from({ length: 6 }, (_, i) => i);
    const running = new Set<Promise<unknown>>();
    while (pending.length || running.size) {
      const release = pending.length ? limits.tryAcquire('search.concurrency', 'james') : null;
      if (release) {
        pending.shift();
        const run: Promise<unknown> = provider.call('concurrency', { ms: 20 }, stepContext()).finally(() => {
          release();
          running.delete(run);
        });
        running.add(run);
      } else {
        await Promise.race(running);
      }
    }
    expect(server.stats.events.filter((e) => e.tool === 'concurrency' && e.event === 'call')).toHaveLength(6);
    expect(server.stats.max).toBe(2);
  });
});
