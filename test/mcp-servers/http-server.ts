/**
 * A real MCP server over Streamable HTTP for tests, on 127.0.0.1 and a free port.
 * In-process: `const srv = await startHttpMcpServer()` → `{url, stats, dropSessions, close}`.
 * As a process: `node test/mcp-servers/http-server.ts` prints its URL on stdout; STEPD_TEST_PORT
 * picks the port (to restart a killed server where it was) and, with STEPD_TEST_LOG set, it
 * appends one JSON line per event to that file (`{"event":"start","pid":…}` first).
 */
import { appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { registerTestTools, type TestEvent } from './tools.ts';

export interface HttpMcpStats {
  events: TestEvent[];
  /** Calls running now and the most ever running at once (the `concurrency` tool). */
  current: number;
  max: number;
  /** Sessions initialized so far, and those open now. */
  sessionsOpened: number;
  sessionsOpen: number;
  /** Request headers of the latest initialize request. */
  lastHeaders: Record<string, string | string[] | undefined>;
}

export interface HttpMcpServerOptions {
  /** The port to listen on (default: a free one). */
  port?: number;
  /** Also append every event, with this process's pid, to this file as a JSON line. */
  logFile?: string;
  /**
   * The answer to a request naming a session the server does not know: 404 (the spec's answer,
   * the default) or 400 "No valid session ID provided" (what the SDK's example servers send).
   */
  unknownSessionStatus?: 404 | 400;
}

export interface HttpMcpServer {
  url: string;
  stats: HttpMcpStats;
  /** Forgets every session, as a restarted server would: the next request on one gets 404. */
  dropSessions(): Promise<void>;
  close(): Promise<void>;
}

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
  });
}

function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

export async function startHttpMcpServer(options: HttpMcpServerOptions = {}): Promise<HttpMcpServer> {
  const stats: HttpMcpStats = { events: [], current: 0, max: 0, sessionsOpened: 0, sessionsOpen: 0, lastHeaders: {} };
  const { logFile } = options;
  const state = {
    record: (event: TestEvent) => {
      stats.events.push(event);
      if (logFile) appendFileSync(logFile, `${JSON.stringify({ ...event, pid: process.pid })}\n`);
    },
    get current() {
      return stats.current;
    },
    set current(v: number) {
      stats.current = v;
    },
    get max() {
      return stats.max;
    },
    set max(v: number) {
      stats.max = v;
    },
  };
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      if (!session) {
        return options.unknownSessionStatus === 400 ? reply(res, 400, 'Bad Request: No valid session ID provided') : reply(res, 404, 'unknown session');
      }
      return session.transport.handleRequest(req, res);
    }
    if (req.method !== 'POST') return reply(res, 400, 'no session');
    const body = await readJson(req);
    if (!isInitializeRequest(body)) return reply(res, 400, 'expected an initialize request');
    stats.lastHeaders = { ...req.headers };
    const server = new McpServer({ name: 'stepd-test-http', version: '1.0.0' });
    registerTestTools(server, state);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server });
        stats.sessionsOpened += 1;
        stats.sessionsOpen = sessions.size;
        state.record({ event: 'session', id });
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
        stats.sessionsOpen = sessions.size;
        state.record({ event: 'session-closed', id });
      },
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) reply(res, 500, err instanceof Error ? err.message : String(err));
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = http.address() as AddressInfo;

  const dropSessions = async (): Promise<void> => {
    const all = [...sessions.values()];
    sessions.clear();
    stats.sessionsOpen = 0;
    await Promise.allSettled(all.map((s) => s.server.close()));
  };

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    stats,
    dropSessions,
    close: async () => {
      await dropSessions();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = process.env.STEPD_TEST_PORT ? Number(process.env.STEPD_TEST_PORT) : 0;
  const server = await startHttpMcpServer({ port, ...(process.env.STEPD_TEST_LOG ? { logFile: process.env.STEPD_TEST_LOG } : {}) });
  if (process.env.STEPD_TEST_LOG) appendFileSync(process.env.STEPD_TEST_LOG, `${JSON.stringify({ event: 'start', pid: process.pid })}\n`);
  process.stdout.write(`${server.url}\n`);
  const stop = () => {
    server.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
