/**
 * A careless MCP server over Streamable HTTP (127.0.0.1, a free port) that echoes the request
 * headers it received — so whatever secret the client sent (`Authorization: Bearer …`) comes
 * back — in every way a reply can carry it:
 *   headers       a tool result (structuredContent and text)
 *   headers-error an `isError` result whose text holds the headers
 *   http-error    an HTTP 500 whose body holds the headers, padded past 1 kB
 * `startEchoHeadersServer({ failInitialize: true })` answers the initialize request itself with
 * HTTP 401 and such a body. With `{ describeHeaders: true }` the tool listing carries them too:
 *   echo-description  the title and description quote the initialize request's headers
 *   echo-schema       an input property's description and default, and the output schema's description
 * `seen` records the Authorization header of every request.
 * Erasable TypeScript only, like the other test servers.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface EchoHeadersServer {
  url: string;
  /** The Authorization header of every HTTP request received. */
  seen: string[];
  close(): Promise<void>;
}

const PADDING = 'x'.repeat(4000);

function echoBody(headers: IncomingMessage['headers']): string {
  return JSON.stringify({ error: 'upstream failed', youSent: headers, padding: PADDING });
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve(text ? JSON.parse(text) : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
}

function isCallOf(body: unknown, tool: string): boolean {
  const msg = body as { method?: unknown; params?: { name?: unknown } } | undefined;
  return msg?.method === 'tools/call' && msg.params?.name === tool;
}

function headersText(headers: Record<string, unknown> | undefined): string {
  return JSON.stringify(headers ?? {});
}

function mcpServerFor(describe?: IncomingMessage['headers']): McpServer {
  const server = new McpServer({ name: 'stepd-test-echo-headers', version: '1.0.0' });
  if (describe) {
    const auth = String(describe.authorization ?? '');
    server.registerTool('echo-description', { title: `Headers (${auth})`, description: `Knows your headers: ${headersText(describe)}`, inputSchema: {} }, () => ({
      content: [{ type: 'text' as const, text: 'ok' }],
    }));
    server.registerTool(
      'echo-schema',
      {
        description: 'Its schemas quote the Authorization header.',
        inputSchema: { auth: z.string().default(auth).describe(`the header to send, e.g. ${auth}`) },
        outputSchema: { sent: z.string().describe(`what was sent: ${auth}`) },
      },
      () => ({ content: [{ type: 'text' as const, text: '{"sent":"ok"}' }], structuredContent: { sent: 'ok' } }),
    );
  }
  server.registerTool('headers', { description: 'Returns the request headers.', inputSchema: {} }, (_args, extra) => {
    const headers = (extra.requestInfo?.headers ?? {}) as Record<string, unknown>;
    return { content: [{ type: 'text' as const, text: headersText(headers) }], structuredContent: { headers } };
  });
  server.registerTool('headers-error', { description: 'Fails, quoting the request headers.', inputSchema: {} }, (_args, extra) => ({
    isError: true,
    content: [{ type: 'text' as const, text: `cannot do that for ${headersText(extra.requestInfo?.headers as Record<string, unknown>)}` }],
  }));
  server.registerTool('http-error', { description: 'Answered by an HTTP 500 echoing the headers.', inputSchema: { n: z.number().optional() } }, () => ({
    content: [{ type: 'text' as const, text: 'never reached' }],
  }));
  return server;
}

export async function startEchoHeadersServer(opts: { failInitialize?: boolean; describeHeaders?: boolean } = {}): Promise<EchoHeadersServer> {
  const seen: string[] = [];
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    seen.push(String(req.headers.authorization ?? ''));
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (opts.failInitialize || isCallOf(body, 'http-error')) {
      res.writeHead(opts.failInitialize ? 401 : 500, { 'content-type': 'application/json' });
      return void res.end(echoBody(req.headers));
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      if (!session) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end(echoBody(req.headers));
      }
      return session.transport.handleRequest(req, res, body);
    }
    const server = mcpServerFor(opts.describeHeaders ? req.headers : undefined);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
      onsessionclosed: (id) => void sessions.delete(id),
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    close: async () => {
      await Promise.allSettled([...sessions.values()].map((s) => s.server.close()));
      sessions.clear();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
