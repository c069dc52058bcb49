/**
 * The `http.request` built-in: `{url, method, headers, query, body, timeout}` → `{status, headers, body}`.
 * Network errors, timeouts, 429 and 5xx are retryable (with `Retry-After` honoured through
 * `retryAfterMs`); other 4xx are not. The response size is capped.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { StepError } from '../errors.js';
import type { ToolContext, ToolInfo, ToolProvider } from './tool.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DETAIL_BODY_CHARS = 16 * 1024;

const queryValue = z.union([z.string(), z.number(), z.boolean()]);

export const httpRequestArgs = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
  method: z
    .string()
    .transform((m) => m.toUpperCase())
    .pipe(z.enum(METHODS))
    .optional(),
  headers: z.record(z.string(), z.string()).optional(),
  query: z.record(z.string(), z.union([queryValue, z.array(queryValue), z.null()])).optional(),
  body: z.unknown().optional(),
  /** Milliseconds, or a duration such as "30s". */
  timeout: z.union([z.number().positive(), z.string().regex(DURATION, 'must be a duration such as "500ms", "30s" or "5m"')]).optional(),
});

export type HttpRequestArgs = z.infer<typeof httpRequestArgs>;

export interface HttpResponseResult {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

export interface HttpToolOptions {
  /** Largest response body accepted, in bytes (default 10 MiB). */
  maxResponseBytes?: number;
  /** Applied when a call gives no `timeout` (default: none; the step's own timeout still applies). */
  defaultTimeoutMs?: number;
  log?: Logger;
  /** Injected clock for `Retry-After` dates. */
  now?: () => number;
}

/** A non-2xx/3xx response. `retryAfterMs` is set when the server sent a usable `Retry-After`. */
export class HttpStatusError extends StepError {
  readonly status: number;
  readonly retryAfterMs: number | undefined;

  constructor(status: number, message: string, details: { status: number; body: unknown; retryAfterMs?: number }) {
    super('http_status', message, { retryable: status === 429 || status >= 500, details });
    this.name = 'HttpStatusError';
    this.status = status;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/** `Retry-After` as delay-seconds or an HTTP-date → milliseconds from `now` (never negative). */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export class HttpToolProvider implements ToolProvider {
  readonly prefix = 'http';
  readonly #maxBytes: number;
  readonly #defaultTimeoutMs: number | undefined;
  readonly #log: Logger | undefined;
  readonly #now: () => number;

  constructor(options: HttpToolOptions = {}) {
    this.#maxBytes = options.maxResponseBytes ?? 10 * 1024 * 1024;
    this.#defaultTimeoutMs = options.defaultTimeoutMs;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
  }

  async list(): Promise<ToolInfo[]> {
    return [
      {
        name: 'request',
        description: 'Sends an HTTP request and returns {status, headers, body}; JSON bodies are parsed.',
        inputSchema: z.toJSONSchema(httpRequestArgs, { io: 'input', unrepresentable: 'any' }),
      },
    ];
  }

  async call(tool: string, rawArgs: unknown, ctx: ToolContext): Promise<HttpResponseResult> {
    if (tool !== 'request') {
      throw new StepError('unknown_tool', `unknown tool "http.${tool}": the http server has only "request"`, {
        retryable: false,
        details: { tool: `http.${tool}`, tools: ['http.request'] },
      });
    }
    const args = parseArgs(rawArgs);
    const method = args.method ?? 'GET';
    const url = new URL(args.url);
    for (const [key, value] of Object.entries(args.query ?? {})) {
      if (value === null) continue;
      for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(key, String(v));
    }
    const headers = new Headers(args.headers);
    let body: string | undefined;
    if (args.body !== undefined) {
      if (method === 'GET' || method === 'HEAD') throw badArgs(`a ${method} request cannot have a body`);
      if (typeof args.body === 'string') body = args.body;
      else {
        body = JSON.stringify(args.body);
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      }
    }
    const target = `${method} ${url.origin}${url.pathname}`;
    const timeoutMs = args.timeout === undefined ? this.#defaultTimeoutMs : toMs(args.timeout);

    const controller = new AbortController();
    const onAbort = () => controller.abort(ctx.signal.reason);
    if (ctx.signal.aborted) throw abortedError(ctx.signal);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    let timedOut = false;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            controller.abort();
          }, timeoutMs);
    try {
      const init: RequestInit = { method, headers, signal: controller.signal, redirect: 'follow' };
      if (body !== undefined) init.body = body;
      const response = await fetch(url, init);
      const text = await readCapped(response, this.#maxBytes, target);
      const result: HttpResponseResult = {
        status: response.status,
        headers: Object.fromEntries(response.headers),
        body: decodeBody(text, response.headers.get('content-type')),
      };
      this.#log?.debug({ workflowId: ctx.workflowId, stepId: ctx.stepId, request: target, status: response.status }, 'http.request done');
      if (response.status < 400) return result;
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), this.#now());
      const details: { status: number; body: unknown; retryAfterMs?: number } = {
        status: response.status,
        body: text.length > DETAIL_BODY_CHARS ? `${text.slice(0, DETAIL_BODY_CHARS)}…` : result.body,
      };
      if (retryAfterMs !== undefined) details.retryAfterMs = retryAfterMs;
      throw new HttpStatusError(response.status, `${target} answered ${response.status} ${response.statusText}`.trim(), details);
    } catch (err) {
      if (err instanceof StepError) throw err;
      if (ctx.signal.aborted) throw abortedError(ctx.signal);
      if (timedOut) {
        throw new StepError('timeout', `${target} timed out after ${timeoutMs} ms`, { retryable: true, details: { timeoutMs } });
      }
      const cause = (err as { cause?: unknown }).cause;
      const reason = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
      throw new StepError('http_error', `${target} failed: ${reason}`, { retryable: true, cause: err });
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
    }
  }
}

function parseArgs(raw: unknown): HttpRequestArgs {
  const parsed = httpRequestArgs.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  const summary = issues.map((i) => `${i.path || '(args)'}: ${i.message}`).join('; ');
  throw badArgs(`invalid http.request arguments: ${summary}`, issues);
}

function badArgs(message: string, issues?: { path: string; message: string }[]): StepError {
  return new StepError('bad_args', message, { retryable: false, details: issues ? { issues } : undefined });
}

function abortedError(signal: AbortSignal): StepError {
  if (signal.reason instanceof StepError) return signal.reason;
  return new StepError('aborted', 'the step was aborted', { retryable: true });
}

function toMs(timeout: number | string): number {
  if (typeof timeout === 'number') return timeout;
  const m = DURATION.exec(timeout);
  return m ? Number(m[1]) * (UNIT_MS[m[2] ?? 'ms'] ?? 1) : Number.NaN;
}

async function readCapped(response: Response, maxBytes: number, target: string): Promise<string> {
  const tooLarge = () =>
    new StepError('response_too_large', `${target}: the response is larger than ${maxBytes} bytes`, {
      retryable: false,
      details: { maxBytes, status: response.status },
    });
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function decodeBody(text: string, contentType: string | null): unknown {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const isJson = type === 'application/json' || type.endsWith('+json');
  if (!isJson) return text;
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
