/**
 * `http.request` through the whole executor against a local node:http server on 127.0.0.1
 * (reachable only through an allow entry of the egress policy): results in step rows and
 * templates, which statuses are retried (429 honouring Retry-After, 5xx) and which are not
 * (404), timeouts, the Idempotency-Key of retries, and a refused address.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { EgressPolicy } from '../../src/tools/egress.js';
import { HttpToolProvider } from '../../src/tools/httpTool.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** Set when the client went away before a response was sent. */
  aborted: boolean;
}

type Route = (req: IncomingMessage, res: ServerResponse, count: number) => void;

/** A local HTTP server: each path has a handler that also gets how many times it was hit. */
async function startHttpServer(routes: Record<string, Route>): Promise<{ base: string; seen: Seen[]; hits: (path: string) => Seen[] }> {
  const seen: Seen[] = [];
  const counts = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), aborted: false };
      seen.push(entry);
      res.on('close', () => {
        if (!res.writableFinished) entry.aborted = true;
      });
      const count = (counts.get(path) ?? 0) + 1;
      counts.set(path, count);
      const route = routes[path];
      if (route) route(req, res, count);
      else json(res, 404, { error: 'not found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  return { base: `http://127.0.0.1:${port}`, seen, hits: (path) => seen.filter((s) => new URL(s.url, 'http://x').pathname === path) };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

async function setup(routes: Record<string, Route>, allow: string[] = ['http://127.0.0.1:*']): Promise<{ t: TestSchema; http: Awaited<ReturnType<typeof startHttpServer>> }> {
  const t = await createTestSchema();
  const http = await startHttpServer(routes);
  await startExecutor(t, { tools: [new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow } }) })] });
  return { t, http };
}

const fastRetry = (maxAttempts: number) => ({ maxAttempts, initial: '10ms', max: '20ms', jitter: false });

function oneRequest(args: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return { start: 'call', steps: { call: { tool: 'http.request', args, retry: fastRetry(3), ...extra } } };
}

describe('http.request in workflows', () => {
  it('returns status, headers and the parsed JSON body of a 200, which the next step reads', async () => {
    const { t, http } = await setup({
      '/items': (req, res) => json(res, 200, { method: req.method, got: 'x', list: [{ id: 1 }, { id: 2 }] }, { 'x-trace': 'abc' }),
      '/text': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('plain {not json}');
      },
    });
    const flow = {
      start: 'post',
      steps: {
        post: {
          tool: 'http.request',
          args: { url: '{{input.base}}/items', method: 'post', query: { q: '{{input.q}}', n: [1, 2] }, headers: { 'x-user': 'alice' }, body: { topic: '{{input.q}}' } },
          next: 'text',
        },
        text: { tool: 'http.request', args: { url: '{{input.base}}/text' }, next: 'use' },
        use: { tool: 'core.echo', args: { second: '{{steps.post.result.body.list[1].id}}', text: '{{steps.text.result.body}}' }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, { base: http.base, q: 'AI safety' }, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ second: 2, text: 'plain {not json}' });
    const [post] = await getSteps(t, id);
    expect(post!.result).toMatchObject({
      status: 200,
      headers: { 'content-type': 'application/json', 'x-trace': 'abc' },
      body: { method: 'POST', got: 'x', list: [{ id: 1 }, { id: 2 }] },
    });
    const [request] = http.hits('/items');
    expect(request).toMatchObject({ method: 'POST', body: '{"topic":"AI safety"}' });
    const query = new URL(request!.url, 'http://x').searchParams;
    expect([query.get('q'), query.getAll('n')]).toEqual(['AI safety', ['1', '2']]);
    expect(request!.headers).toMatchObject({ 'x-user': 'alice', 'content-type': 'application/json' });
  });

  it('fails on 404 after one attempt, not retryable, with the response body in the error', async () => {
    const { t, http } = await setup({});
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/missing` }), {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'http_status', retryable: false, details: { status: 404, body: { error: 'not found' } } });
    expect((await getSteps(t, id)).map((s) => [s.status, s.attempt])).toEqual([['failed', 1]]);
    expect(http.hits('/missing')).toHaveLength(1);
  });

  it('retries a 429 no sooner than its Retry-After, then succeeds', async () => {
    const { t, http } = await setup({
      '/busy': (_req, res, n) => (n === 1 ? json(res, 429, { error: 'slow down' }, { 'retry-after': '1' }) : json(res, 200, { ok: n })),
    });
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/busy` }), {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { status: 200, body: { ok: 2 } } });
    const [first, second] = await getSteps(t, id);
    expect([first!.status, first!.attempt, second!.status, second!.attempt]).toEqual(['failed', 1, 'done', 2]);
    expect(first!.error).toMatchObject({ code: 'http_status', retryable: true, details: { status: 429, retryAfterMs: 1000 } });
    // The retry was scheduled by Retry-After (1 s), not by the 10 ms backoff.
    expect(second!.ready_at!.getTime() - first!.completed_at!.getTime()).toBeGreaterThanOrEqual(990);
    expect(http.hits('/busy')).toHaveLength(2);
  });

  it('retries 503s with backoff and succeeds on a later attempt', async () => {
    const { t, http } = await setup({
      '/flaky': (_req, res, n) => (n <= 2 ? json(res, 503, { error: 'unavailable' }) : json(res, 200, { ok: n })),
    });
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/flaky` }), {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { status: 200, body: { ok: 3 } } });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.status, s.attempt, s.error?.code ?? null])).toEqual([
      ['failed', 1, 'http_status'],
      ['failed', 2, 'http_status'],
      ['done', 3, null],
    ]);
    expect(steps[0]!.error).toMatchObject({ retryable: true, details: { status: 503 } });
    expect(http.hits('/flaky')).toHaveLength(3);
  });

  it('fails exhausted 5xx retries with the last error', async () => {
    const { t, http } = await setup({ '/down': (_req, res) => json(res, 500, { error: 'boom' }) });
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/down` }, { retry: fastRetry(2) }), {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'http_status', retryable: true, details: { status: 500 }, attempt: 2 });
    expect(http.hits('/down')).toHaveLength(2);
  });

  it.each([
    ['the request timeout', { timeout: '100ms' }, {}],
    ['the step timeout', {}, { timeout: '200ms' }],
  ])('aborts a request that outlives %s, retryably, and gives up after the last attempt', async (_what, args, step) => {
    const { t, http } = await setup({ '/slow': () => undefined });
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/slow`, ...args }, { retry: fastRetry(2), ...step }), {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'timeout', retryable: true });
    expect((await getSteps(t, id)).map((s) => [s.status, s.attempt, s.error?.code])).toEqual([
      ['failed', 1, 'timeout'],
      ['failed', 2, 'timeout'],
    ]);
    // Both requests reached the server and were abandoned by the client.
    await waitFor(() => http.hits('/slow').length === 2 && http.hits('/slow').every((s) => s.aborted), 'both requests to be aborted');
  });

  it('sends the same Idempotency-Key on every attempt of a step', async () => {
    const { t, http } = await setup({
      '/charge': (_req, res, n) => (n === 1 ? json(res, 503, { error: 'try again' }) : json(res, 200, { charged: true })),
    });
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/charge`, method: 'POST', body: { amount: 5 } }), {}, { user: 'alice' });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const hits = http.hits('/charge');
    expect(hits).toHaveLength(2);
    const [first] = await getSteps(t, id);
    expect(hits.map((h) => h.headers['idempotency-key'])).toEqual([`${id}:call:${first!.id}`, `${id}:call:${first!.id}`]);
  });

  it('fails a request to a loopback address no allow entry names, once, without reaching the server', async () => {
    const { t, http } = await setup({ '/admin': (_req, res) => json(res, 200, { secret: true }) }, []);
    const id = await insertWorkflow(t, oneRequest({ url: `${http.base}/admin` }), {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'egress_denied', retryable: false, details: { reason: 'loopback' } });
    expect((await getSteps(t, id)).map((s) => [s.status, s.attempt])).toEqual([['failed', 1]]);
    expect(http.seen).toHaveLength(0);
  });
});
