/**
 * The side-effect counter: one local HTTP server that is both
 *   POST /effect   the target of `http.request` steps (body {wf, e, i?, ms}), and
 *   /mcp           an MCP server over Streamable HTTP with one tool, `effect` (same arguments),
 * Every call is a side effect: it is counted under its identity `wf:e:i` (workflow, effect
 * name in the flow, forEach item) with the idempotency key it carried (the `Idempotency-Key`
 * header, or `_meta.idempotencyKey`). The server also measures how many calls are in flight at
 * once (from the request's arrival until its response ends or its connection drops, so a
 * killed executor's calls stop counting when it dies).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

export interface EffectRecord {
  calls: number;
  /** The key of each call, null when it carried none. */
  keys: (string | null)[];
}

/** What one scenario's calls did; reset between scenarios. */
export class EffectLedger {
  readonly effects = new Map<string, EffectRecord>();
  inFlight = 0;
  maxInFlight = 0;
  calls = 0;

  record(id: string, key: string | null): void {
    this.calls += 1;
    const r = this.effects.get(id) ?? { calls: 0, keys: [] };
    r.calls += 1;
    r.keys.push(key);
    this.effects.set(id, r);
  }

  /** Counts a call in flight until `res` closes (answered, or the caller went away). */
  track(res: ServerResponse): void {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    res.once('close', () => (this.inFlight -= 1));
  }
}

export function effectId(wf: unknown, e: unknown, i: unknown): string {
  return `${String(wf)}:${String(e)}:${i === undefined || i === null || i === '' ? '' : String(i)}`;
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => resolve(undefined));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        resolve(undefined);
      }
    });
  });
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const effectArgs = {
  wf: z.union([z.string(), z.number()]),
  e: z.string(),
  i: z.union([z.string(), z.number()]).optional(),
  ms: z.number().optional(),
};

function isToolCall(body: unknown): boolean {
  const one = (m: unknown) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'tools/call';
  return Array.isArray(body) ? body.some(one) : one(body);
}

export class EffectServer {
  /** Replaced by reset(); calls are always recorded in the current one. */
  ledger = new EffectLedger();
  private readonly sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();
  private readonly http = createServer((req, res) => {
    this.handle(req, res).catch((err: unknown) => reply(res, 500, { error: err instanceof Error ? err.message : String(err) }));
  });
  private port = 0;

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.http.listen(0, '127.0.0.1', resolve));
    this.port = (this.http.address() as AddressInfo).port;
  }

  get httpUrl(): string {
    return `http://127.0.0.1:${this.port}/effect`;
  }

  get mcpUrl(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  /** A fresh ledger for the next scenario. */
  reset(): EffectLedger {
    this.ledger = new EffectLedger();
    return this.ledger;
  }

  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(all.map((s) => s.server.close()));
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/effect') return this.httpEffect(req, res);
    if (url.pathname === '/mcp') return this.mcp(req, res);
    reply(res, 404, { error: 'not found' });
  }

  private async httpEffect(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ledger = this.ledger;
    ledger.track(res);
    const body = (await readBody(req)) as { wf?: unknown; e?: unknown; i?: unknown; ms?: unknown } | undefined;
    if (!body || body.wf === undefined || typeof body.e !== 'string') return reply(res, 400, { error: 'expected {wf, e, i?, ms?}' });
    const key = req.headers['idempotency-key'];
    ledger.record(effectId(body.wf, body.e, body.i), typeof key === 'string' && key !== '' ? key : null);
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    await wait(typeof body.ms === 'number' ? body.ms : 0, gone.signal);
    reply(res, 200, { ok: true, wf: body.wf, e: body.e, i: body.i ?? null });
  }

  private async mcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const sessionId = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (typeof sessionId === 'string') {
      const session = this.sessions.get(sessionId);
      if (!session) return reply(res, 404, { jsonrpc: '2.0', error: { code: -32001, message: 'unknown session' }, id: null });
      if (isToolCall(body)) this.ledger.track(res);
      return session.transport.handleRequest(req, res, body);
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      return reply(res, 400, { jsonrpc: '2.0', error: { code: -32000, message: 'expected an initialize request' }, id: null });
    }
    const server = new McpServer({ name: 'stepd-chaos-effects', version: '1.0.0' });
    server.registerTool('effect', { description: 'A counted side effect that takes `ms`.', inputSchema: effectArgs }, async (args, extra) => {
      const key = extra._meta?.['idempotencyKey'];
      this.ledger.record(effectId(args.wf, args.e, args.i), typeof key === 'string' && key !== '' ? key : null);
      await wait(args.ms ?? 0, extra.signal);
      return { content: [{ type: 'text' as const, text: '{}' }], structuredContent: { ok: true, wf: String(args.wf), e: args.e } };
    });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        this.sessions.set(id, { transport, server });
      },
      onsessionclosed: (id) => {
        this.sessions.delete(id);
      },
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }
}
