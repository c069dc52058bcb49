/**
 * A `fetch` for the `openai` client that goes through the egress policy of `http.request`
 * (src/tools/egress.ts): the host is resolved and every address checked, and the socket connects
 * to exactly the checked address (httpSend.ts), so a second DNS answer cannot swap it. A
 * loopback, private or metadata `baseUrl` is refused with `egress_denied` unless an
 * `http.allow` entry names it. Redirects are not followed (a model API does not redirect; a 3xx
 * is handed back as it is, an error). The body is read whole, capped.
 */
import { StepError } from '../../errors.js';
import { describeUrl, type EgressPolicy } from '../egress.js';
import { defaultConnector, readBody, send, type Connector } from '../httpSend.js';

export interface EgressFetchOptions {
  egress: EgressPolicy;
  /** The user the step runs as (their `http.users` allow entries apply). */
  user: string | null;
  connect?: Connector;
  /** Largest response accepted (default 16 MiB). */
  maxBytes?: number;
}

type FetchInput = string | URL | Request;

export function egressFetch(opts: EgressFetchOptions): (input: FetchInput, init?: RequestInit) => Promise<Response> {
  const connect = opts.connect ?? defaultConnector;
  const maxBytes = opts.maxBytes ?? 16 * 1024 * 1024;
  return async (input, init = {}) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new StepError('bad_config', `${describeUrl(url)}: only http and https are supported`, { retryable: false });
    const method = (init.method ?? 'GET').toUpperCase();
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const body = await bodyText(init.body);
    const signal = init.signal ?? new AbortController().signal;
    // Checked first; an EgressDeniedError (a StepError) goes through the client untouched.
    const target = await opts.egress.check(url, opts.user);
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
    const response = await send({ target, method, headers, body, signal, connect });
    const text = await readBody(response, maxBytes, `${method} ${describeUrl(url)}`);
    const status = response.status;
    // The Response constructor refuses a body for these.
    const noBody = status === 204 || status === 205 || status === 304;
    return new Response(noBody ? null : text, { status, statusText: response.statusText, headers: withoutEncoding(response.headers) });
  };
}

/** The decoded body is handed on: its encoding and length headers no longer apply. */
function withoutEncoding(headers: Record<string, string>): Headers {
  const out = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (name === 'content-encoding' || name === 'content-length' || name === 'transfer-encoding') continue;
    out.set(name, value);
  }
  return out;
}

async function bodyText(body: RequestInit['body']): Promise<string | undefined> {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return body;
  return await new Response(body).text();
}
