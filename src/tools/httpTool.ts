/**
 * The `http.request` built-in: `{url, method, headers, query, body, timeout}` → `{status, headers, body}`.
 * Network errors, timeouts, 429 and 5xx are retryable (with `Retry-After` honoured through
 * `retryAfterMs`); other 4xx are not. The response size is capped. Every hop (redirects are
 * followed here, up to 20) passes the egress policy and connects to the address it checked; a
 * refused one fails with `egress_denied` before any connection. Each request carries the step's
 * `Idempotency-Key` unless the flow sets one.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { StepError } from '../errors.js';
import { cutRemoteText, REMOTE_TEXT_CHARS, type Secrets } from '../secrets.js';
import { describeUrl, EgressPolicy, type EgressTarget } from './egress.js';
import { defaultConnector, readBody, send, type Connector, type ExchangeResponse } from './httpSend.js';
import type { ToolContext, ToolInfo, ToolProvider } from './tool.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

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
  /** Which addresses may be reached (default: no allow entries, so only public addresses). */
  egress?: EgressPolicy;
  /** Opens each connection to the checked address (default: net/tls.connect; tests count connections). */
  connect?: Connector;
  /** Redacted from a remote error body before it is cut to about 1 kB. */
  secrets?: Secrets;
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
  readonly #egress: EgressPolicy;
  readonly #connect: Connector;
  readonly #secrets: Secrets | undefined;

  constructor(options: HttpToolOptions = {}) {
    this.#maxBytes = options.maxResponseBytes ?? 10 * 1024 * 1024;
    this.#defaultTimeoutMs = options.defaultTimeoutMs;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
    this.#egress = options.egress ?? new EgressPolicy();
    this.#connect = options.connect ?? defaultConnector;
    this.#secrets = options.secrets;
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
    let method: string = args.method ?? 'GET';
    let url = new URL(args.url);
    if (url.username !== '' || url.password !== '') throw badArgs('a URL with credentials is not supported: send them in an Authorization header');
    for (const [key, value] of Object.entries(args.query ?? {})) {
      if (value === null) continue;
      for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(key, String(v));
    }
    const headers = requestHeaders(args.headers, ctx.idempotencyKey);
    // The tool call's span, unless the flow sets its own traceparent.
    if (ctx.traceparent && !headers.has('traceparent')) headers.set('traceparent', ctx.traceparent);
    let body: string | undefined;
    if (args.body !== undefined) {
      if (method === 'GET' || method === 'HEAD') throw badArgs(`a ${method} request cannot have a body`);
      if (typeof args.body === 'string') body = args.body;
      else {
        body = JSON.stringify(args.body);
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      }
    }
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
    let target = `${method} ${describeUrl(url)}`;
    try {
      for (let hop = 0; ; hop++) {
        target = `${method} ${describeUrl(url)}`;
        // Every hop is checked against the policy and connects to the address checked.
        const checked = await untilAborted(this.#check(url, ctx.user, target), controller.signal);
        const response = await send({ target: checked, method, headers: Object.fromEntries(headers), body, signal: controller.signal, connect: this.#connect });
        const location = response.headers.location;
        if (REDIRECTS.has(response.status) && location !== undefined) {
          response.message.destroy();
          if (hop >= MAX_REDIRECTS) {
            throw new StepError('too_many_redirects', `${target}: more than ${MAX_REDIRECTS} redirects`, { retryable: false, details: { maxRedirects: MAX_REDIRECTS } });
          }
          const next = redirectTarget(url, location, target);
          if ((response.status === 303 && method !== 'HEAD') || ((response.status === 301 || response.status === 302) && method === 'POST')) {
            method = 'GET';
            body = undefined;
            headers.delete('content-type');
          }
          if (next.origin !== url.origin) for (const h of CREDENTIAL_HEADERS) headers.delete(h);
          this.#log?.debug({ workflowId: ctx.workflowId, stepId: ctx.stepId, request: target, status: response.status, to: describeUrl(next) }, 'http.request redirected');
          url = next;
          continue;
        }
        return await this.#result(response, target, ctx);
      }
    } catch (err) {
      if (err instanceof StepError) throw err;
      if (ctx.signal.aborted) throw abortedError(ctx.signal);
      if (timedOut) {
        throw new StepError('timeout', `${target} timed out after ${timeoutMs} ms`, { retryable: true, details: { timeoutMs } });
      }
      const reason = err instanceof Error ? err.message : String(err);
      throw new StepError('http_error', `${target} failed: ${reason}`, { retryable: true, cause: err });
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
    }
  }

  async #check(url: URL, user: string | null, target: string): Promise<EgressTarget> {
    try {
      return await this.#egress.check(url, user);
    } catch (err) {
      if (err instanceof StepError) throw err;
      throw new StepError('http_error', `${target} failed: ${err instanceof Error ? err.message : String(err)}`, { retryable: true, cause: err });
    }
  }

  async #result(response: ExchangeResponse, target: string, ctx: ToolContext): Promise<HttpResponseResult> {
    const text = await readBody(response, this.#maxBytes, target);
    const result: HttpResponseResult = { status: response.status, headers: response.headers, body: decodeBody(text, response.headers['content-type'] ?? null) };
    this.#log?.debug({ workflowId: ctx.workflowId, stepId: ctx.stepId, request: target, status: response.status }, 'http.request done');
    if (response.status < 400) return result;
    const retryAfterMs = parseRetryAfter(response.headers['retry-after'] ?? null, this.#now());
    // The remote body is cut and redacted before it can reach a stored error or a log line.
    const details: { status: number; body: unknown; retryAfterMs?: number } = {
      status: response.status,
      body: text.length > REMOTE_TEXT_CHARS ? cutRemoteText(text, this.#secrets) : result.body,
    };
    if (retryAfterMs !== undefined) details.retryAfterMs = retryAfterMs;
    throw new HttpStatusError(response.status, `${target} answered ${response.status} ${response.statusText}`.trim(), details);
  }
}

/** `promise`, or a rejection as soon as `signal` aborts (a DNS lookup cannot be cancelled). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('aborted'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 20;
/** Not sent to another origin after a redirect. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

function requestHeaders(given: Record<string, string> | undefined, idempotencyKey: string): Headers {
  let headers: Headers;
  try {
    headers = new Headers(given);
  } catch (err) {
    throw badArgs(`invalid http.request headers: ${(err as Error).message}`);
  }
  // The same key on every attempt of the step, so the server can drop a repeated side effect.
  if (!headers.has('idempotency-key')) headers.set('idempotency-key', idempotencyKey);
  if (!headers.has('accept')) headers.set('accept', '*/*');
  if (!headers.has('user-agent')) headers.set('user-agent', 'stepd');
  return headers;
}

function redirectTarget(from: URL, location: string, target: string): URL {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw new StepError('http_error', `${target} redirected to an invalid URL`, { retryable: false });
  }
  if (next.protocol !== 'http:' && next.protocol !== 'https:') {
    throw new StepError('http_error', `${target} redirected to a ${next.protocol} URL; only http and https are followed`, { retryable: false });
  }
  if (next.username !== '' || next.password !== '') throw new StepError('http_error', `${target} redirected to a URL with credentials`, { retryable: false });
  return next;
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
