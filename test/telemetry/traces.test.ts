/**
 * Traces of workflows run by a real executor, exported to an in-memory exporter: the workflow,
 * step and tool spans with the ids as attributes, one trace per workflow (ids derived from it),
 * and the W3C traceparent of the tool span received by a local HTTP server (http.request) and by
 * an MCP server in _meta.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EXECUTOR_OPTIONS, Executor } from '../../src/executor/executor.js';
import { silentLogger } from '../../src/logger.js';
import { OtelTracing, PinnedIdGenerator } from '../../src/telemetry/otelTracing.js';
import { workflowTraceIds } from '../../src/telemetry/workflowTraceIds.js';
import { CoreTools } from '../../src/tools/builtins.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import { HttpToolProvider } from '../../src/tools/httpTool.js';
import { createMcpProviders } from '../../src/tools/mcp/index.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { startHttpMcpServer } from '../mcp-servers/http-server.js';

const DATABASE = 'test-cluster/test';

/** An executor whose tracing exports to memory. */
async function tracedExecutor(t: TestSchema, tools: ToolProvider[]): Promise<InMemorySpanExporter> {
  const exporter = new InMemorySpanExporter();
  const ids = new PinnedIdGenerator();
  const provider = new BasicTracerProvider({ idGenerator: ids, spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const log = silentLogger();
  const executorId = `test-${randomBytes(4).toString('hex')}`;
  const tracing = new OtelTracing({ tracer: provider.getTracer('stepd-test'), ids, database: DATABASE, schema: t.schema, executorId, log, shutdown: () => provider.shutdown() });
  const executor = new Executor(
    { ...DEFAULT_EXECUTOR_OPTIONS, databaseUrl: t.url, schema: t.schema, executorId, pollIntervalMs: 50, watchdogIntervalMs: 100, shutdownGraceMs: 2_000 },
    { log, tools: new ToolRegistry([new CoreTools(), ...tools]), tracing },
  );
  await executor.start();
  onCleanup(async () => {
    await executor.stop({ graceMs: 0 });
    await tracing.shutdown();
  });
  return exporter;
}

/** A local HTTP server that records the headers of each request and answers 200 {ok: true}. */
async function recordingServer(): Promise<{ base: string; seen: IncomingHttpHeaders[] }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function named(spans: ReadableSpan[], name: string): ReadableSpan[] {
  return spans.filter((s) => s.name === name);
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe('traces', () => {
  it('a workflow with an http.request step has workflow, step and tool spans in one trace, and the server got the tool span\'s traceparent', async () => {
    const t = await createTestSchema();
    const http = await recordingServer();
    const exporter = await tracedExecutor(t, [new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow: ['http://127.0.0.1:*'] } }) })]);
    const flow = {
      start: 'prepare',
      steps: {
        prepare: { tool: 'core.echo', args: { path: '/orders' }, next: 'call' },
        call: { tool: 'http.request', args: { url: `${http.base}{{steps.prepare.result.path}}`, method: 'POST', body: { n: 1 } }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, {}, { name: 'orders' });
    await waitForWorkflow(t, id, ['completed']);
    const steps = await getSteps(t, id);
    const byName = new Map(steps.map((s) => [s.name, s]));

    const spans = await waitFor(() => {
      const all = exporter.getFinishedSpans();
      return named(all, 'workflow orders').length === 1 ? all : undefined;
    }, 'the workflow span');
    const ids = workflowTraceIds(DATABASE, t.schema, id);
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([ids.traceId]));

    const [workflow] = named(spans, 'workflow orders');
    expect(workflow!.spanContext().spanId).toBe(ids.spanId);
    expect(parentOf(workflow!)).toBeUndefined();
    expect(workflow!.attributes).toMatchObject({ 'stepd.workflow.id': id, 'stepd.workflow.name': 'orders', 'stepd.workflow.status': 'completed' });

    for (const name of ['prepare', 'call']) {
      const [step] = named(spans, `step ${name}`);
      expect(parentOf(step!)).toBe(ids.spanId);
      expect(step!.attributes).toMatchObject({
        'stepd.workflow.id': id,
        'stepd.step.id': byName.get(name)!.id,
        'stepd.step.name': name,
        'stepd.step.attempt': 1,
        'stepd.outcome': 'done',
      });
    }
    const [step] = named(spans, 'step call');
    const [tool] = named(spans, 'tool http.request');
    expect(parentOf(tool!)).toBe(step!.spanContext().spanId);
    expect(tool!.attributes).toMatchObject({ 'stepd.tool': 'http.request', 'stepd.step.id': byName.get('call')!.id, 'stepd.workflow.id': id });

    expect(http.seen).toHaveLength(1);
    expect(http.seen[0]!.traceparent).toBe(`00-${ids.traceId}-${tool!.spanContext().spanId}-01`);
  });

  it('retries are further step spans of the same trace, with their attempt and error', async () => {
    const t = await createTestSchema();
    const exporter = await tracedExecutor(t, []);
    const flow = { start: 'flaky', steps: { flaky: { tool: 'core.fail', args: { message: 'nope', retryable: true }, retry: { maxAttempts: 2, initial: '10ms', jitter: false } } } };
    const id = await insertWorkflow(t, flow, {}, { name: 'flaky' });
    await waitForWorkflow(t, id, ['failed']);
    const spans = await waitFor(() => {
      const all = exporter.getFinishedSpans();
      return named(all, 'workflow flaky').length === 1 ? all : undefined;
    }, 'the workflow span');
    const ids = workflowTraceIds(DATABASE, t.schema, id);
    const attempts = named(spans, 'step flaky').map((s) => [s.attributes['stepd.step.attempt'], s.attributes['stepd.outcome'], parentOf(s), s.spanContext().traceId]);
    expect(attempts).toEqual([
      [1, 'failed', ids.spanId, ids.traceId],
      [2, 'failed', ids.spanId, ids.traceId],
    ]);
    const [workflow] = named(spans, 'workflow flaky');
    expect(workflow!.status.code).toBe(2);
  });

  it('a readied signal wait gets a step span once the outcome lane records it (started and ended then), in its workflow\'s trace', async () => {
    const t = await createTestSchema();
    const exporter = await tracedExecutor(t, []);
    const flow = { start: 'paid', steps: { paid: { signal: { name: 'payment', key: 'o-1' }, next: 'ship' }, ship: { tool: 'core.echo', args: {}, done: true } } };
    const id = await insertWorkflow(t, flow, {}, { name: 'order' });
    await waitFor(async () => (await getSteps(t, id)).some((s) => s.name === 'paid' && s.status === 'pending'), 'the wait');
    await t.q(`INSERT INTO stepd.signals (name, key, payload) VALUES ('payment', 'o-1', '{}')`);
    await waitForWorkflow(t, id, ['completed']);
    const [paid] = await getSteps(t, id);
    const span = await waitFor(() => named(exporter.getFinishedSpans(), 'step paid')[0], 'the wait\'s step span');
    const ids = workflowTraceIds(DATABASE, t.schema, id);
    expect(span.spanContext().traceId).toBe(ids.traceId);
    expect(parentOf(span)).toBe(ids.spanId);
    expect(span.attributes).toMatchObject({ 'stepd.workflow.id': id, 'stepd.step.id': paid!.id, 'stepd.step.name': 'paid', 'stepd.step.attempt': 1, 'stepd.outcome': 'done' });
    expect(span.attributes['stepd.tool']).toBeUndefined();
    expect(span.status.code).toBe(1);
    expect(named(exporter.getFinishedSpans(), 'step paid')).toHaveLength(1);
  });

  it('a workflow cancelled by a client gets its workflow span, with the step span its cancelled tool call left', async () => {
    const t = await createTestSchema();
    const exporter = await tracedExecutor(t, []);
    const id = await insertWorkflow(t, { start: 'wait', steps: { wait: { tool: 'core.sleep', args: { ms: 60_000 } } } }, {}, { name: 'long' });
    await waitFor(async () => (await getSteps(t, id)).some((s) => s.status === 'running'), 'the step to run');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    const workflow = await waitFor(() => named(exporter.getFinishedSpans(), 'workflow long')[0], 'the workflow span');
    expect(workflow.attributes).toMatchObject({ 'stepd.workflow.id': id, 'stepd.workflow.status': 'cancelled' });
    const step = await waitFor(() => named(exporter.getFinishedSpans(), 'step wait')[0], 'the step span');
    expect(parentOf(step)).toBe(workflow.spanContext().spanId);
    expect(named(exporter.getFinishedSpans(), 'workflow long')).toHaveLength(1);
  });

  it('an MCP tool call carries the tool span\'s traceparent in _meta', async () => {
    const t = await createTestSchema();
    const web = await startHttpMcpServer();
    onCleanup(() => web.close());
    const providers = createMcpProviders({ web: { url: web.url } }, { log: silentLogger(), idleMs: 60_000 });
    onCleanup(async () => {
      await Promise.all(providers.map((p) => p.close()));
    });
    const exporter = await tracedExecutor(t, providers);
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: { tool: 'web.meta' } } }, {}, { name: 'mcp' });
    await waitForWorkflow(t, id, ['completed']);
    const [ask] = await getSteps(t, id);
    const tool = await waitFor(() => named(exporter.getFinishedSpans(), 'tool web.meta')[0], 'the tool span');
    const meta = (ask!.result as { meta: Record<string, unknown> }).meta;
    expect(meta.traceparent).toBe(`00-${tool.spanContext().traceId}-${tool.spanContext().spanId}-01`);
    expect(meta).toMatchObject({ workflowId: id, stepId: ask!.id });
  });
});
