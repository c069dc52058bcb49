/**
 * A local HTTP server (node:http) that speaks the OpenAI chat-completions protocol as the real API
 * does: POST {base}/chat/completions with a Bearer key, JSON answers with `usage`, JSON error
 * bodies (`{"error": {...}}`, a wrong key quoted in the message as the real API does), 429 with
 * Retry-After, 5xx, slow answers. Faults are queued per test (`fail`); otherwise each request is
 * answered by `answer` (default: a value built from the request's json_schema, enum values chosen
 * by the words of the last user message, or a short text without a schema).
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onCleanup } from './db.js';

export interface ChatRequest {
  headers: IncomingHttpHeaders;
  body: {
    model: string;
    messages: { role: string; content: unknown }[];
    response_format?: { type: string; json_schema?: { name: string; schema: Record<string, unknown>; strict?: boolean } };
    temperature?: number;
    max_tokens?: number;
  };
  /** Set when the client went away before the answer was sent. */
  aborted: boolean;
  /** When the request arrived (Date.now()). */
  at: number;
}

export type Fault =
  | { status: 429; retryAfter?: string }
  | { status: 500 | 502 | 503 }
  | { status: 401 }
  | { delayMs: number }
  /** Answers 200 with this content (e.g. text that breaks the schema). */
  | { content: string }
  /** Never answers (until the client goes away). */
  | { hang: true };

export interface ChatServer {
  baseUrl: string;
  requests: ChatRequest[];
  /** Queues faults: each request takes the next one; an empty queue answers normally. */
  fail(...faults: Fault[]): void;
  /** Replaces the answerer (content of the assistant message). */
  answer: (req: ChatRequest) => string;
  close(): Promise<void>;
}

export async function startChatServer(opts: { apiKey?: string } = {}): Promise<ChatServer> {
  const faults: Fault[] = [];
  const requests: ChatRequest[] = [];
  const api: ChatServer = {
    baseUrl: '',
    requests,
    fail: (...f) => faults.push(...f),
    answer: defaultAnswer,
    close: async () => {},
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (req.method !== 'POST' || !path.endsWith('/chat/completions')) return error(res, 404, `Unknown request URL: ${req.method} ${path}`, 'invalid_request_error');
      let body: ChatRequest['body'];
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest['body'];
      } catch {
        return error(res, 400, 'We could not parse the JSON body of your request.', 'invalid_request_error');
      }
      const entry: ChatRequest = { headers: req.headers, body, aborted: false, at: Date.now() };
      requests.push(entry);
      res.on('close', () => {
        if (!res.writableFinished) entry.aborted = true;
      });
      const given = /^Bearer (.*)$/.exec(req.headers.authorization ?? '')?.[1];
      if (opts.apiKey !== undefined && given !== opts.apiKey) {
        return error(res, 401, `Incorrect API key provided: ${given ?? ''}. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', 'invalid_api_key');
      }
      const fault = faults.shift();
      if (fault && 'hang' in fault) return;
      if (fault && 'status' in fault) {
        if (fault.status === 429) {
          if (fault.retryAfter !== undefined) res.setHeader('retry-after', fault.retryAfter);
          return error(res, 429, 'Rate limit reached for requests. Please try again later.', 'requests', 'rate_limit_exceeded');
        }
        if (fault.status === 401) return error(res, 401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
        return error(res, fault.status, 'The server had an error while processing your request. Sorry about that!', 'server_error');
      }
      const send = () => {
        const content = fault && 'content' in fault ? fault.content : api.answer(entry);
        answer(res, body, content);
      };
      if (fault && 'delayMs' in fault) setTimeout(send, fault.delayMs).unref();
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  api.baseUrl = `http://127.0.0.1:${port}/v1`;
  api.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  onCleanup(() => api.close());
  return api;
}

function error(res: ServerResponse, status: number, message: string, type: string, code: string | null = null): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type, param: null, code } }));
}

/** Words, as a stand-in for tokens. */
function tokens(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

function answer(res: ServerResponse, body: ChatRequest['body'], content: string): void {
  const prompt = body.messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))).join('\n');
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: `${body.model}-2024-07-18`,
      choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: tokens(prompt), completion_tokens: tokens(content), total_tokens: tokens(prompt) + tokens(content) },
      system_fingerprint: 'fp_test',
    }),
  );
}

/** The last user message's text. */
export function lastUserText(req: ChatRequest): string {
  const users = req.body.messages.filter((m) => m.role === 'user');
  const last = users[users.length - 1]?.content;
  return typeof last === 'string' ? last : JSON.stringify(last ?? '');
}

function defaultAnswer(req: ChatRequest): string {
  const schema = req.body.response_format?.json_schema?.schema;
  const text = lastUserText(req);
  if (!schema) return `Thank you for your message. We are looking into it: ${text.slice(0, 80)}`;
  return JSON.stringify(fromSchema(schema, text.toLowerCase()));
}

/** Words that also pick an enum value (a stand-in for the model's judgement). */
const HINTS: Record<string, string[]> = { billing: ['invoice', 'charged', 'refund', 'payment'], bug: ['crash', 'error', 'broken'] };

/** A value that matches a (simple) JSON Schema; enum values are chosen by the words of `text`. */
function fromSchema(schema: Record<string, unknown>, text: string): unknown {
  if (Array.isArray(schema.enum)) {
    const named = schema.enum.find((v) => typeof v === 'string' && (text.includes(v.toLowerCase()) || (HINTS[v] ?? []).some((w) => text.includes(w))));
    return named ?? schema.enum[schema.enum.length - 1];
  }
  switch (schema.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, s] of Object.entries((schema.properties ?? {}) as Record<string, Record<string, unknown>>)) out[k] = fromSchema(s, text);
      return out;
    }
    case 'array':
      return [fromSchema((schema.items ?? {}) as Record<string, unknown>, text)];
    case 'boolean':
      return /urgent|asap|down|outage/.test(text);
    case 'integer':
    case 'number':
      return 1;
    default:
      return `About: ${text.slice(0, 60)}`;
  }
}
