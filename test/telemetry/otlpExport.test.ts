/**
 * Tracing as an operator turns it on: `stepd start` with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
 * a local OTLP/HTTP receiver (JSON bodies), running a workflow whose http.request step calls a
 * local server allowed by the config's http.allow. The receiver gets the workflow, step and tool
 * spans of one trace under the configured service name, and the server the tool span's traceparent.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { envFor, spawnCli, writeJson } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, onCleanup, waitFor, waitForWorkflow } from '../helpers/db.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: OtlpValue }[];
}
interface ReceivedSpan extends OtlpSpan {
  service: string | undefined;
  attrs: Record<string, string | number | undefined>;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An OTLP/HTTP receiver for JSON trace exports: every span received, with its service name. */
async function otlpReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; paths: string[] }> {
  const spans: ReceivedSpan[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      paths.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: { resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const rs of body.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) {
            const attrs = Object.fromEntries(s.attributes.map((a) => [a.key, a.value.stringValue ?? (a.value.intValue === undefined ? undefined : Number(a.value.intValue))]));
            spans.push({ ...s, service, attrs });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  return { url: await listen(server), spans, paths };
}

describe('stepd start with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  it('exports the workflow, step and tool spans of a workflow over OTLP/HTTP JSON, and passes traceparent to http.request', async () => {
    const t = await createTestSchema();
    const otlp = await otlpReceiver();
    const seen: IncomingHttpHeaders[] = [];
    const target = await listen(
      createServer((req, res) => {
        seen.push(req.headers);
        req.resume();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      }),
    );
    const config = await writeJson({ http: { allow: ['http://127.0.0.1:*'] } }, 'stepd.config.json');
    const daemon = spawnCli(['start', '--config', config, '--poll-interval', '100ms'], {
      env: {
        ...envFor(t),
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'stepd-under-test',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      },
    });
    await daemon.waitFor(/stepd: ready/);
    const id = await insertWorkflow(t, { start: 'call', steps: { call: { tool: 'http.request', args: { url: `${target}/hook` } } } }, {}, { name: 'hook' });
    await waitForWorkflow(t, id, ['completed']);
    const workflow = await waitFor(() => otlp.spans.find((s) => s.name === 'workflow hook'), 'the workflow span at the receiver');
    const step = await waitFor(() => otlp.spans.find((s) => s.name === 'step call'), 'the step span');
    const tool = await waitFor(() => otlp.spans.find((s) => s.name === 'tool http.request'), 'the tool span');

    expect(otlp.paths[0]).toBe('POST /v1/traces application/json');
    expect(new Set([workflow.service, step.service, tool.service])).toEqual(new Set(['stepd-under-test']));
    expect(new Set([workflow.traceId, step.traceId, tool.traceId]).size).toBe(1);
    expect(workflow.parentSpanId ?? '').toBe('');
    expect(step.parentSpanId).toBe(workflow.spanId);
    expect(tool.parentSpanId).toBe(step.spanId);
    expect(workflow.attrs).toMatchObject({ 'stepd.workflow.id': id, 'stepd.workflow.status': 'completed' });
    expect(step.attrs).toMatchObject({ 'stepd.workflow.id': id, 'stepd.step.name': 'call', 'stepd.step.attempt': 1, 'stepd.tool': 'http.request' });
    expect(typeof step.attrs['stepd.step.id']).toBe('string');
    expect(seen[0]!.traceparent).toBe(`00-${tool.traceId}-${tool.spanId}-01`);

    const { code } = await daemon.kill('SIGTERM');
    expect(code).toBe(0);
  });
});
