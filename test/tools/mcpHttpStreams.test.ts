/**
 * Answer streams that end without the answer: a Streamable HTTP server that closes a call's SSE
 * stream cleanly (as one shutting down does), or whose stream cannot be resumed, or that goes
 * away while stepd initializes, fails the call or the connect at once as retryable, not after
 * the call's or the connect's time limit. The server here is a minimal hand-written one, so each
 * misbehaviour is exact.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpProviders, McpServerProvider } from '../../src/tools/mcp/index.js';
import { rejectionOf, silentLogger, stepContext } from './helpers.js';

type Misbehaviour = 'none' | 'close-call' | 'close-call-resumable' | 'close-initialize' | 'drop-initialize';

interface FakeServer {
  url: string;
  requests: { method: string; rpc?: string; lastEventId?: string }[];
  close(): Promise<void>;
}

const servers: FakeServer[] = [];
const providers: McpServerProvider[] = [];

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const SESSION = 'fake-session-1';

/** An MCP server speaking just enough Streamable HTTP, misbehaving as told. */
async function fakeServer(misbehaviour: Misbehaviour): Promise<FakeServer> {
  const requests: FakeServer['requests'] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const lastEventId = req.headers['last-event-id'];
      if (req.method !== 'POST') {
        requests.push({ method: req.method ?? '?', ...(typeof lastEventId === 'string' ? { lastEventId } : {}) });
        res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
        return;
      }
      const msg = JSON.parse(body) as { id?: number; method: string };
      requests.push({ method: 'POST', rpc: msg.method });
      const sse = () => res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': SESSION });
      const answer = (result: unknown, eventId?: string) => {
        sse();
        res.end(`${eventId ? `id: ${eventId}\n` : ''}event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result })}\n\n`);
      };
      switch (msg.method) {
        case 'initialize':
          if (misbehaviour === 'close-initialize') return void (sse(), res.end(': nothing to say\n\n'));
          if (misbehaviour === 'drop-initialize') return void (sse(), res.write(': about to die\n\n'), setTimeout(() => res.socket?.destroy(), 50));
          return answer({ protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'fake', version: '1' } });
        case 'notifications/initialized':
          return void res.writeHead(202, { 'mcp-session-id': SESSION }).end();
        case 'tools/list':
          return answer({ tools: [{ name: 'hang', inputSchema: { type: 'object' } }, { name: 'ok', inputSchema: { type: 'object' } }] });
        case 'tools/call': {
          const name = (msg as { params?: { name?: string } }).params?.name;
          if (name === 'ok' || misbehaviour === 'none') return answer({ content: [{ type: 'text', text: '"fine"' }] });
          sse();
          // The stream ends cleanly, without the answer (with an event id: the client may resume it).
          return void res.end(misbehaviour === 'close-call-resumable' ? 'id: ev-1\ndata: \n\n' : ': bye\n\n');
        }
        default:
          return answer({});
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const fake: FakeServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(fake);
  return fake;
}

function provider(url: string): McpServerProvider {
  // Limits far beyond anything the test waits for: nothing here may end by reaching them.
  const [p] = createMcpProviders({ web: { url } }, { log: silentLogger(), idleMs: 60_000, callTimeoutMs: 120_000, connectTimeoutMs: 120_000 });
  if (!p) throw new Error('no provider');
  providers.push(p);
  return p;
}

describe('MCP over Streamable HTTP: answer streams that end without the answer', () => {
  it('fails a call whose answer stream closes cleanly without the answer, at once and retryably, and the next call opens a new session', async () => {
    const server = await fakeServer('close-call');
    const p = provider(server.url);
    const err = await rejectionOf(p.call('hang', {}, stepContext()));
    expect(err).toMatchObject({ code: 'mcp_connection_lost', retryable: true });
    expect(err.message).toContain('closed the answer stream without answering');
    expect(await p.call('ok', {}, stepContext())).toBe('fine');
    expect(server.requests.filter((r) => r.rpc === 'initialize')).toHaveLength(2);
  });

  it('fails a call at once when its stream had an event id but cannot be resumed', async () => {
    const server = await fakeServer('close-call-resumable');
    const p = provider(server.url);
    const err = await rejectionOf(p.call('hang', {}, stepContext()));
    expect(err).toMatchObject({ code: 'mcp_connection_lost', retryable: true });
    expect(err.message).toContain('resuming the answer stream failed: HTTP 405');
    expect(server.requests.some((r) => r.method === 'GET' && r.lastEventId === 'ev-1')).toBe(true);
  });

  it.each(['close-initialize', 'drop-initialize'] as const)('fails the connect at once when the server goes away while initializing (%s)', async (misbehaviour) => {
    const server = await fakeServer(misbehaviour);
    const p = provider(server.url);
    const err = await rejectionOf(p.call('ok', {}, stepContext()));
    expect(err).toMatchObject({ code: 'mcp_unavailable', retryable: true });
    expect(err.message).toContain('lost while connecting');
  });

  it('passes a well-behaved server through', async () => {
    const server = await fakeServer('none');
    expect(await provider(server.url).call('hang', {}, stepContext())).toBe('fine');
  });
});
