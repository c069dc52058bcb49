/**
 * One HTTP exchange of `http.request` over node:http, on a socket opened to the address the
 * egress policy checked (never a fresh DNS answer): no connection pooling, so a socket opened
 * for one request and policy decision is never reused by another. Redirects are the caller's.
 */
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { LookupAddress } from 'node:dns';
import { connect as netConnect, isIP, type LookupFunction, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import { StepError } from '../errors.js';
import type { EgressTarget, ResolvedAddress } from './egress.js';

/**
 * Where a socket must go: `addresses` are the checked addresses (tried in order, Happy Eyeballs
 * when there are several), `address` the first; `servername` is the host name TLS names and
 * verifies the certificate against.
 */
export interface ConnectTarget {
  address: string;
  family: 4 | 6;
  addresses: ResolvedAddress[];
  port: number;
  tls: boolean;
  servername: string;
}

/** Opens the socket of one exchange (net.connect / tls.connect by default; injectable for tests). */
export type Connector = (target: ConnectTarget) => Socket;

/** A `lookup` for net.connect that answers only with the checked addresses: no second DNS query. */
function fixedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (err: null, all: LookupAddress[]) => void)(null, addresses);
    else (callback as (err: null, address: string, family: number) => void)(null, addresses[0]!.address, addresses[0]!.family);
  };
}

export const defaultConnector: Connector = (t) => {
  const where = { host: t.servername, port: t.port, lookup: fixedLookup(t.addresses), autoSelectFamily: t.addresses.length > 1 };
  return t.tls ? tlsConnect({ ...where, ALPNProtocols: ['http/1.1'], ...(isIP(t.servername) ? {} : { servername: t.servername }) }) : netConnect(where);
};

export interface Exchange {
  target: EgressTarget;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  signal: AbortSignal;
  connect: Connector;
}

export interface ExchangeResponse {
  status: number;
  statusText: string;
  headers: Record<string, string>;
  message: IncomingMessage;
}

/** Sends the request and resolves when the response head arrives (the body is still to be read). */
export function send(ex: Exchange): Promise<ExchangeResponse> {
  const { url } = ex.target;
  const target: ConnectTarget = {
    address: ex.target.address,
    family: ex.target.family,
    addresses: ex.target.addresses,
    port: ex.target.port,
    tls: url.protocol === 'https:',
    servername: ex.target.hostname,
  };
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      method: ex.method,
      path: `${url.pathname}${url.search}`,
      headers: { ...ex.headers, host: url.host },
      setHost: false,
      // With no agent, node:http uses this socket for this one request (no pool, no keep-alive).
      createConnection: () => ex.connect(target),
      signal: ex.signal,
    });
    req.once('response', (message: IncomingMessage) => {
      resolve({ status: message.statusCode ?? 0, statusText: message.statusMessage ?? '', headers: flattenHeaders(message.headers), message });
    });
    req.once('error', reject);
    if (ex.body !== undefined) req.setHeader('content-length', Buffer.byteLength(ex.body));
    req.end(ex.body);
  });
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

const DECODERS: Record<string, (buf: Buffer, opts: { maxOutputLength: number }) => Promise<Buffer>> = {
  gzip: promisify(gunzip) as never,
  'x-gzip': promisify(gunzip) as never,
  deflate: promisify(inflate) as never,
  br: promisify(brotliDecompress) as never,
};

/**
 * The body as text, refusing more than `maxBytes` (declared, received or decompressed) with
 * `response_too_large`. A gzip, deflate or br body is decompressed.
 */
export async function readBody(res: ExchangeResponse, maxBytes: number, what: string): Promise<string> {
  const tooLarge = () =>
    new StepError('response_too_large', `${what}: the response is larger than ${maxBytes} bytes`, {
      retryable: false,
      details: { maxBytes, status: res.status },
    });
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.message.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of res.message as AsyncIterable<Buffer>) {
    total += chunk.byteLength;
    if (total > maxBytes) {
      res.message.destroy();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  const raw = Buffer.concat(chunks);
  const encoding = (res.headers['content-encoding'] ?? '').trim().toLowerCase();
  const decode = DECODERS[encoding];
  if (!decode || raw.byteLength === 0) return raw.toString('utf8');
  try {
    return (await decode(raw, { maxOutputLength: maxBytes })).toString('utf8');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge();
    throw new StepError('http_error', `${what}: the ${encoding} body could not be decoded: ${(err as Error).message}`, { retryable: true, cause: err });
  }
}
