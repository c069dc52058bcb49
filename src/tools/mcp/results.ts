/**
 * Pure mapping between MCP and steps: a tools/call result → the step result, and anything the
 * SDK throws → a StepError that says whether another attempt could succeed and whether the
 * connection it came from should be dropped.
 */
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StepError } from '../../errors.js';
import { cutRemoteText, type Secrets } from '../../secrets.js';

/** The parts of a tools/call result stepd reads (older servers may send `toolResult`). */
export interface CallResultLike {
  content?: unknown;
  structuredContent?: unknown;
  isError?: unknown;
  toolResult?: unknown;
}

export interface CallSite {
  server: string;
  tool: string;
}

/**
 * A tools/call result as a step result (docs/mcp.md, "MCP results"):
 * - `structuredContent` when present;
 * - only text blocks: their text, joined by newlines, parsed as JSON when it is JSON, else the text;
 * - any other block (image, audio, resource_link, resource, or a type stepd does not know):
 *   `{text, content}`, `text` being the joined text blocks (null when none) and `content` every
 *   block in order, as `contentBlock` maps it;
 * - no content at all: null.
 * An `isError` result's text becomes the error message, redacted and cut to about 1 kB.
 */
export function toStepResult(result: CallResultLike, site: CallSite, secrets?: Secrets): unknown {
  const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  if (result.isError === true) {
    const text = cutRemoteText(textOf(content), secrets);
    throw new StepError('tool_error', text || `${site.server}.${site.tool} reported an error`, {
      retryable: false,
      details: { server: site.server, tool: site.tool, ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }) },
    });
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null) return result.structuredContent;
  if (!('content' in result) && 'toolResult' in result) return result.toolResult;
  if (content.length === 0) return null;
  const texts = content.filter(isTextBlock);
  const joined = texts.map((b) => b.text).join('\n');
  if (texts.length === content.length) return parseJsonText(joined);
  return { text: texts.length === 0 ? null : joined, content: content.map(contentBlock) };
}

/** One MCP content block as stored in a step result (unknown fields, `_meta` and `annotations` dropped). */
export type StoredBlock =
  | { type: 'text'; text: string }
  | { type: 'image' | 'audio'; data: string; mimeType: string }
  | { type: 'resource_link'; uri: string; name: string; title?: string; mimeType?: string; description?: string }
  | { type: 'resource'; resource: { uri: string; mimeType?: string; text?: string; blob?: string } }
  | { type: string };

/**
 * One block in its MCP shape with only the fields listed in StoredBlock: a string field missing
 * or of another type is left out (a required one as well, so a broken block stays visible); a
 * block of a type stepd does not know keeps only its `type` (`"unknown"` when it has none).
 */
export function contentBlock(block: unknown): StoredBlock {
  const b = isObject(block) ? block : {};
  const type = typeof b.type === 'string' ? b.type : 'unknown';
  switch (type) {
    case 'text':
      return { type, ...pick(b, ['text']) } as StoredBlock;
    case 'image':
    case 'audio':
      return { type, ...pick(b, ['data', 'mimeType']) } as StoredBlock;
    case 'resource_link':
      return { type, ...pick(b, ['uri', 'name', 'title', 'mimeType', 'description']) } as StoredBlock;
    case 'resource': {
      const r = isObject(b.resource) ? b.resource : {};
      return { type, resource: pick(r, ['uri', 'mimeType', 'text', 'blob']) } as StoredBlock;
    }
    default:
      return { type };
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The listed fields of `from` that are strings, in the listed order. */
function pick(from: Record<string, unknown>, keys: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    const v = from[k];
    if (typeof v === 'string') out[k] = v;
  }
  return out;
}

function isTextBlock(block: unknown): block is { type: 'text'; text: string } {
  return typeof block === 'object' && block !== null && (block as { type?: unknown }).type === 'text' && typeof (block as { text?: unknown }).text === 'string';
}

function textOf(content: unknown[]): string {
  return content
    .filter(isTextBlock)
    .map((b) => b.text)
    .join('\n')
    .trim();
}

/** JSON values (objects, arrays, numbers, true/false/null, quoted strings) parse; other text stays text. */
export function parseJsonText(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === '') return text;
  if (!/^[[{"\-0-9tfn]/.test(trimmed)) return text;
  try {
    return JSON.parse(trimmed) as unknown;
  } catch {
    return text;
  }
}

export interface ClassifiedError {
  error: StepError;
  /** True when the connection can no longer be trusted and the next call should reconnect. */
  reset: boolean;
}

/**
 * Converts what callTool/listTools threw. Call only when the step's signal is not aborted. The
 * server's text in the error (a JSON-RPC error message, an HTTP error body) is redacted and cut
 * to about 1 kB: it goes into the stored error and the log.
 */
export function classifyMcpError(err: unknown, site: CallSite, secrets?: Secrets): ClassifiedError {
  const name = `${site.server}.${site.tool}`;
  const details = { server: site.server, tool: site.tool };
  if (err instanceof StepError) return { error: err, reset: false };
  const remote = remoteMessage(err, secrets);
  if (err instanceof McpError) {
    const data = { ...details, mcpCode: err.code };
    switch (err.code) {
      case ErrorCode.ConnectionClosed:
        return { error: transportError(`the connection to MCP server "${site.server}" closed during ${name}`, data), reset: true };
      case ErrorCode.RequestTimeout:
        return { error: new StepError('timeout', `${name} got no answer in time: ${remote}`, { retryable: true, details: data }), reset: false };
      case ErrorCode.InvalidParams:
        return { error: new StepError('bad_args', `${name} rejected its arguments: ${remote}`, { retryable: false, details: data }), reset: false };
      case ErrorCode.InternalError:
        return { error: new StepError('mcp_error', `${name} failed: ${remote}`, { retryable: true, details: data }), reset: false };
      default:
        return { error: new StepError('mcp_error', `${name} failed: ${remote}`, { retryable: false, details: data }), reset: false };
    }
  }
  if (err instanceof StreamableHTTPError) {
    return { error: transportError(`MCP server "${site.server}" answered HTTP ${err.code ?? '?'} during ${name}: ${remote}`, { ...details, httpStatus: err.code }), reset: true };
  }
  return { error: transportError(`MCP server "${site.server}" could not be reached during ${name}: ${remote}`, details), reset: true };
}

/**
 * True for an HTTP answer that means the server no longer knows the session: 404 (the Streamable
 * HTTP spec's answer for an expired or unknown session id) or a 400 that names the session (what
 * many servers, the SDK's examples among them, answer: "No valid session ID provided"). The
 * server refused the request before running it, so it is safe to send again on a new session.
 */
export function isSessionExpired(err: unknown): boolean {
  if (!(err instanceof StreamableHTTPError)) return false;
  return err.code === 404 || (err.code === 400 && /session/i.test(err.message));
}

function transportError(message: string, details: unknown): StepError {
  // No `cause`: the SDK's error holds the server's whole reply, which must not be logged.
  return new StepError('mcp_transport', message, { retryable: true, details });
}

/** A thrown error's message as it may be stored or logged: redacted, cut to about 1 kB. */
export function remoteMessage(err: unknown, secrets: Secrets | undefined): string {
  return cutRemoteText(err instanceof Error ? err.message : String(err), secrets);
}

/** The error for a step whose signal aborted: the executor's reason when it is a StepError. */
export function abortedError(signal: AbortSignal): StepError {
  if (signal.reason instanceof StepError) return signal.reason;
  return new StepError('aborted', 'the step was aborted', { retryable: true });
}

/** Resolves like `promise`, or rejects as soon as `signal` aborts (the promise keeps running). */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortedError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortedError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
