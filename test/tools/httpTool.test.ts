import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StepError, StepTimeoutError } from '../../src/errors.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import { HttpStatusError, HttpToolProvider, parseRetryAfter } from '../../src/tools/httpTool.js';
import { Secrets } from '../../src/secrets.js';
import { rejectionOf, silentLogger, stepContext, waitFor } from './helpers.js';

let server: Server;
let base: string;
const held: ServerResponse[] = [];
let closedEarly = 0;

function route(req: IncomingMessage, res: ServerResponse, body: string): void {
  const url = new URL(req.url ?? '/', 'http://x');
  switch (url.pathname) {
    case '/json':
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-thing': 'yes' });
      return void res.end(JSON.stringify({ ok: true, n: 1 }));
    case '/text':
      res.writeHead(200, { 'content-type': 'text/plain' });
      return void res.end('hello');
    case '/echo':
      res.writeHead(201, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ method: req.method, contentType: req.headers['content-type'] ?? null, auth: req.headers.authorization ?? null, query: url.search, body }));
    case '/headers':
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify(req.headers));
    case '/redirect':
      res.writeHead(Number(url.searchParams.get('status') ?? '302'), { location: url.searchParams.get('to') ?? '/headers' });
      return void res.end('moved');
    case '/long-error':
      res.writeHead(500, { 'content-type': 'text/plain' });
      return void res.end(`${'e'.repeat(1010)}SECRET-VALUE-123${'e'.repeat(900)}`);
    case '/missing':
      res.writeHead(404, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ error: 'no such thing' }));
    case '/busy':
      res.writeHead(429, { 'retry-after': url.searchParams.get('after') ?? '7', 'content-type': 'text/plain' });
      return void res.end('slow down');
    case '/down':
      res.writeHead(503, { 'content-type': 'text/plain' });
      return void res.end('maintenance');
    case '/big':
      res.writeHead(200, url.searchParams.has('chunked') ? { 'content-type': 'text/plain' } : { 'content-type': 'text/plain', 'content-length': '5000' });
      if (url.searchParams.has('chunked')) {
        for (let i = 0; i < 5; i++) res.write('x'.repeat(1000));
        return void res.end();
      }
      return void res.end('x'.repeat(5000));
    case '/hang':
      held.push(res);
      res.on('close', () => {
        if (!res.writableEnded) closedEarly += 1;
      });
      return;
    default:
      res.writeHead(500);
      res.end();
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => route(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of held) res.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

// The test server is on loopback, which the egress policy refuses unless an allow entry names it.
const http = new HttpToolProvider({
  log: silentLogger(),
  maxResponseBytes: 2000,
  now: () => Date.parse('2030-01-01T00:00:00Z'),
  egress: new EgressPolicy({ policy: { allow: ['http://127.0.0.1:*'] } }),
  secrets: new Secrets(['SECRET-VALUE-123']),
});

describe('http.request', () => {
  it('returns status, headers and the parsed JSON body of a 200', async () => {
    const result = await http.call('request', { url: `${base}/json` }, stepContext());
    expect(result).toMatchObject({ status: 200, body: { ok: true, n: 1 } });
    expect(result.headers['x-thing']).toBe('yes');
  });

  it('returns text bodies as text', async () => {
    expect((await http.call('request', { url: `${base}/text` }, stepContext())).body).toBe('hello');
  });

  it('sends object bodies as JSON with content-type, query parameters and headers', async () => {
    const result = await http.call(
      'request',
      { url: `${base}/echo?keep=1`, method: 'post', headers: { Authorization: 'Bearer t' }, query: { q: 'a b', n: 2, many: ['x', 'y'], skip: null }, body: { topic: 'AI' } },
      stepContext(),
    );
    expect(result.status).toBe(201);
    expect(result.body).toEqual({ method: 'POST', contentType: 'application/json', auth: 'Bearer t', query: '?keep=1&q=a+b&n=2&many=x&many=y', body: '{"topic":"AI"}' });
  });

  it('fails a 404 without retrying, with the status and body in details', async () => {
    const err = await rejectionOf(http.call('request', { url: `${base}/missing` }, stepContext()));
    expect(err).toBeInstanceOf(HttpStatusError);
    expect(err).toMatchObject({ code: 'http_status', retryable: false, details: { status: 404, body: { error: 'no such thing' } } });
  });

  it('fails a 429 retryably and carries Retry-After seconds as retryAfterMs', async () => {
    const err = await rejectionOf(http.call('request', { url: `${base}/busy` }, stepContext()));
    expect(err).toMatchObject({ code: 'http_status', retryable: true, retryAfterMs: 7000, details: { status: 429, body: 'slow down', retryAfterMs: 7000 } });
  });

  it('reads a Retry-After HTTP-date against the injected clock', async () => {
    const after = encodeURIComponent('Tue, 01 Jan 2030 00:00:30 GMT');
    const err = await rejectionOf(http.call('request', { url: `${base}/busy?after=${after}` }, stepContext()));
    expect(err).toMatchObject({ retryable: true, retryAfterMs: 30_000 });
    expect(parseRetryAfter('garbage')).toBeUndefined();
    expect(parseRetryAfter('Tue, 01 Jan 2030 00:00:00 GMT', Date.parse('2031-01-01'))).toBe(0);
  });

  it('fails a 503 retryably', async () => {
    const err = await rejectionOf(http.call('request', { url: `${base}/down` }, stepContext()));
    expect(err).toMatchObject({ code: 'http_status', retryable: true, details: { status: 503, body: 'maintenance' } });
    expect(err.retryAfterMs).toBeUndefined();
  });

  it('times out retryably after the timeout argument', async () => {
    const before = held.length;
    const err = await rejectionOf(http.call('request', { url: `${base}/hang`, timeout: '50ms' }, stepContext()));
    expect(err).toMatchObject({ code: 'timeout', retryable: true });
    expect(held.length).toBe(before + 1);
  });

  it("aborts the request when the step's signal aborts, keeping the executor's reason", async () => {
    const controller = new AbortController();
    const before = held.length;
    const call = http.call('request', { url: `${base}/hang` }, stepContext({ signal: controller.signal }));
    await waitFor(() => held.length > before, 'the request to reach the server');
    const closedBefore = closedEarly;
    controller.abort();
    expect(await rejectionOf(call)).toMatchObject({ code: 'aborted', retryable: true });
    await waitFor(() => closedEarly > closedBefore, 'the server to see the connection close');

    const timedOut = new AbortController();
    timedOut.abort(new StepTimeoutError(60_000));
    expect(await rejectionOf(http.call('request', { url: `${base}/hang` }, stepContext({ signal: timedOut.signal })))).toBeInstanceOf(StepTimeoutError);
  });

  it('refuses responses over the size cap, declared or streamed', async () => {
    for (const url of [`${base}/big`, `${base}/big?chunked=1`]) {
      expect(await rejectionOf(http.call('request', { url }, stepContext()))).toMatchObject({ code: 'response_too_large', retryable: false });
    }
  });

  it('fails retryably with http_error when the server cannot be reached', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const err = await rejectionOf(http.call('request', { url: `http://127.0.0.1:${port}/x` }, stepContext()));
    expect(err).toMatchObject({ code: 'http_error', retryable: true });
  });

  it('rejects bad arguments without retrying', async () => {
    for (const args of [{}, { url: 'not a url' }, { url: `${base}/json`, method: 'FETCH' }, { url: `${base}/json`, body: 'x' }, { url: `${base}/json`, extra: 1 }, 'x']) {
      const err = await rejectionOf(http.call('request', args, stepContext()));
      expect(err).toBeInstanceOf(StepError);
      expect(err).toMatchObject({ code: 'bad_args', retryable: false });
    }
    expect(await rejectionOf(http.call('get', {}, stepContext()))).toMatchObject({ code: 'unknown_tool', retryable: false });
  });

  it("sends the step's idempotency key as Idempotency-Key, the same on every attempt", async () => {
    const ctx = stepContext({ idempotencyKey: '7:charge:41' });
    const first = await http.call('request', { url: `${base}/headers` }, ctx);
    const retry = await http.call('request', { url: `${base}/headers` }, { ...ctx, attempt: 2, stepId: '99' });
    expect((first.body as Record<string, string>)['idempotency-key']).toBe('7:charge:41');
    expect((retry.body as Record<string, string>)['idempotency-key']).toBe('7:charge:41');
  });

  it('leaves an Idempotency-Key the flow sets itself alone, whatever its case', async () => {
    const result = await http.call('request', { url: `${base}/headers`, headers: { 'IDEMPOTENCY-key': 'mine' } }, stepContext({ idempotencyKey: '7:x:1' }));
    expect((result.body as Record<string, string>)['idempotency-key']).toBe('mine');
  });

  it('follows redirects (303 turns a POST into a GET without a body) and keeps the key', async () => {
    const to = encodeURIComponent('/headers');
    const result = await http.call('request', { url: `${base}/redirect?status=303&to=${to}`, method: 'POST', body: { a: 1 } }, stepContext({ idempotencyKey: 'k-1' }));
    expect(result.status).toBe(200);
    const seen = result.body as Record<string, string>;
    expect([seen['idempotency-key'], seen['content-type'], seen['content-length']]).toEqual(['k-1', undefined, undefined]);
  });

  it('drops credentials when a redirect leaves the origin, and connects to the address it resolved', async () => {
    // other.test exists only in this resolver: the connection goes where the policy's lookup said.
    const elsewhere = encodeURIComponent(`${base.replace('127.0.0.1', 'other.test')}/headers`);
    const resolve = async (host: string) => (host === 'other.test' ? [{ address: '127.0.0.1', family: 4 as const }] : []);
    const policy = new EgressPolicy({ policy: { allow: ['http://127.0.0.1:*', 'http://other.test:*'] }, resolve });
    const client = new HttpToolProvider({ egress: policy });
    const result = await client.call('request', { url: `${base}/redirect?to=${elsewhere}`, headers: { authorization: 'Bearer t', 'x-other': 'kept' } }, stepContext());
    expect(result.body).toMatchObject({ 'x-other': 'kept' });
    expect((result.body as Record<string, string>).authorization).toBeUndefined();
  });

  it('keeps about 1 kB of a long error body, redacted before it is cut', async () => {
    const err = await rejectionOf(http.call('request', { url: `${base}/long-error` }, stepContext()));
    const body = (err.details as { body: string }).body;
    expect(body.length).toBeLessThan(1100);
    expect(body).toContain('[redacted]');
    expect(body).not.toContain('SECRET');
  });

  it('lists request with an input schema', async () => {
    const [tool] = await http.list();
    expect(tool).toMatchObject({ name: 'request', inputSchema: { type: 'object', required: ['url'] } });
  });
});
