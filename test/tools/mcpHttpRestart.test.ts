/**
 * An HTTP MCP server that dies or restarts: the call in flight fails at once as retryable (not at
 * its timeout), and the next call runs on a new session at its first try. The server runs as a
 * real child process, killed with SIGKILL and started again on the same port.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpProviders, McpServerProvider } from '../../src/tools/mcp/index.js';
import { callsOf, httpServerProcess, type HttpServerProcess } from '../mcp-servers/fixtures.js';
import { startHttpMcpServer, type HttpMcpServer } from '../mcp-servers/http-server.js';
import { rejectionOf, silentLogger, stepContext, waitFor } from './helpers.js';

const providers: McpServerProvider[] = [];
const servers: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function httpProvider(url: string): McpServerProvider {
  // A call limit far beyond anything the test waits for: a call must never end by reaching it.
  const [provider] = createMcpProviders({ web: { url } }, { log: silentLogger(), idleMs: 60_000, callTimeoutMs: 60_000 });
  if (!provider) throw new Error('no provider');
  providers.push(provider);
  return provider;
}

async function serverProcess(): Promise<HttpServerProcess> {
  const server = await httpServerProcess();
  servers.push(server);
  return server;
}

async function inProcessServer(options: Parameters<typeof startHttpMcpServer>[0] = {}): Promise<HttpMcpServer> {
  const server = await startHttpMcpServer(options);
  servers.push(server);
  return server;
}

function sessionsOf(server: HttpServerProcess): number {
  return server.events().filter((e) => e.event === 'session').length;
}

describe('MCP over Streamable HTTP when the server dies or restarts', () => {
  it('fails a call whose server was killed mid-call as retryable connection loss, not as a timeout, and the next call opens a new session', async () => {
    const server = await serverProcess();
    const provider = httpProvider(server.url);
    expect(await provider.call('echo', { before: true }, stepContext())).toEqual({ before: true });
    // The rejection is awaited later: take it now, so it is never an unhandled one meanwhile.
    const call = rejectionOf(provider.call('sleep', { ms: 120_000 }, stepContext()));
    await waitFor(() => callsOf(server.events(), 'sleep').length === 1, 'the sleep call to reach the server');
    await server.kill();
    const err = await call;
    expect(err).toMatchObject({ code: 'mcp_connection_lost', retryable: true, details: { server: 'web' } });
    expect(err.message).toContain('"web"');
    expect(provider.connected).toBe(false);

    await server.restart();
    expect(await provider.call('echo', { after: true }, stepContext())).toEqual({ after: true });
    expect(sessionsOf(server)).toBe(2);
    expect(callsOf(server.events(), 'sleep').filter((e) => e.event === 'done')).toHaveLength(0);
  });

  it('fails every call in flight at once when the server dies under them', async () => {
    const server = await serverProcess();
    const provider = httpProvider(server.url);
    const calls = [1, 2, 3].map((i) => rejectionOf(provider.call('sleep', { ms: 120_000 + i }, stepContext())));
    await waitFor(() => callsOf(server.events(), 'sleep').length === 3, 'three sleep calls to reach the server');
    await server.kill();
    const errors = await Promise.all(calls);
    expect(errors.map((e) => [e.code, e.retryable])).toEqual([
      ['mcp_connection_lost', true],
      ['mcp_connection_lost', true],
      ['mcp_connection_lost', true],
    ]);
  });

  it('runs the first call after a server restart on a new session at its first try', async () => {
    const server = await serverProcess();
    const provider = httpProvider(server.url);
    expect(await provider.call('echo', { n: 1 }, stepContext())).toEqual({ n: 1 });
    await server.restart();
    expect(await provider.call('echo', { n: 2 }, stepContext())).toEqual({ n: 2 });
    expect(await provider.call('echo', { n: 3 }, stepContext())).toEqual({ n: 3 });
    expect(sessionsOf(server)).toBe(2);
    expect(callsOf(server.events(), 'echo')).toHaveLength(3);
  });

  it('re-initializes once when a server answers 400 "No valid session ID provided" for a forgotten session', async () => {
    const server = await inProcessServer({ unknownSessionStatus: 400 });
    const provider = httpProvider(server.url);
    expect(await provider.call('echo', { n: 1 }, stepContext())).toEqual({ n: 1 });
    await server.dropSessions();
    expect(await provider.call('echo', { n: 2 }, stepContext())).toEqual({ n: 2 });
    expect(server.stats.sessionsOpened).toBe(2);
    expect(callsOf(server.stats.events, 'echo')).toHaveLength(2);
  });

  it('lists tools again on a new session when the server forgot the old one', async () => {
    const server = await inProcessServer();
    const provider = httpProvider(server.url);
    await provider.list();
    await server.dropSessions();
    expect((await provider.list()).map((t) => t.name)).toContain('echo');
    expect(server.stats.sessionsOpened).toBe(2);
  });

  it('fails retryably while the killed server is still down, and succeeds once it is back', async () => {
    const server = await serverProcess();
    const provider = httpProvider(server.url);
    await provider.call('echo', {}, stepContext());
    await server.kill();
    expect(await rejectionOf(provider.call('echo', {}, stepContext()))).toMatchObject({ retryable: true });
    await server.restart();
    expect(await provider.call('echo', { up: true }, stepContext())).toEqual({ up: true });
  });
});
