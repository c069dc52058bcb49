/**
 * Tracing as the standard OTEL_* variables configure it. Not configured (no OTEL_TRACES_EXPORTER
 * other than `none`, no OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
 * OTEL_SDK_DISABLED=true): NO_TRACING, and no OpenTelemetry module is even loaded. Configured:
 * the SDK is imported here, a TracerProvider of this daemon's own is made (never registered
 * globally) with the resource from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (service.name
 * defaults to `stepd`), a batch span processor (OTEL_BSP_*), and the exporters named by
 * OTEL_TRACES_EXPORTER: `otlp` (the default; OTLP over HTTP with JSON bodies, to
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, with
 * OTEL_EXPORTER_OTLP_HEADERS) and `console`. The sampler is OTEL_TRACES_SAMPLER's.
 */
import pg from 'pg';
import { readDatabaseIdentity } from '../db/queries/traces.js';
import type { Logger } from '../logger.js';
import { NO_TRACING, type StepTracing } from './stepTracing.js';

export interface TracingSetup {
  databaseUrl: string;
  schema: string;
  executorId: string;
  log: Logger;
  env?: NodeJS.ProcessEnv;
}

/** The exporters OTEL_* asks for; empty when tracing is off. */
export function tracesExporters(env: NodeJS.ProcessEnv): string[] {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return [];
  const named = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (named.includes('none')) return [];
  if (named.length > 0) return [...new Set(named)];
  return env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() ? ['otlp'] : [];
}

export async function tracingFromEnv(setup: TracingSetup): Promise<StepTracing> {
  const env = setup.env ?? process.env;
  const wanted = tracesExporters(env);
  if (wanted.length === 0) return NO_TRACING;
  const log = setup.log.child({ component: 'tracing' });
  const [base, resources, { OtelTracing, PinnedIdGenerator }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    import('./otelTracing.js'),
  ]);
  const exporters = [];
  for (const name of wanted) {
    if (name === 'otlp') {
      const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/json').trim();
      if (protocol !== 'http/json') log.warn({ protocol }, 'stepd exports OTLP traces over HTTP with JSON bodies only (OTEL_EXPORTER_OTLP_PROTOCOL=http/json); sending http/json');
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
      exporters.push(new OTLPTraceExporter());
    } else if (name === 'console') exporters.push(new base.ConsoleSpanExporter());
    else log.warn({ exporter: name }, 'unknown OTEL_TRACES_EXPORTER value ignored (stepd knows otlp, console, none)');
  }
  if (exporters.length === 0) return NO_TRACING;
  const ids = new PinnedIdGenerator();
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': 'stepd' }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new base.BasicTracerProvider({
    resource,
    idGenerator: ids,
    spanProcessors: exporters.map((e) => new base.BatchSpanProcessor(e)),
  });
  const database = await databaseIdentity(setup, log);
  log.info({ exporters: wanted, service: resource.attributes['service.name'] }, 'tracing on');
  return new OtelTracing({
    tracer: provider.getTracer('stepd'),
    ids,
    database,
    schema: setup.schema,
    executorId: setup.executorId,
    log,
    shutdown: () => provider.shutdown(),
  });
}

/** The database's identity for trace ids; the URL's host/port/database when it cannot be read. */
async function databaseIdentity(setup: TracingSetup, log: Logger): Promise<string> {
  const client = new pg.Client({ connectionString: setup.databaseUrl, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return await readDatabaseIdentity(client);
  } catch (err) {
    log.warn({ err }, 'could not read the database identity for trace ids; using the URL\'s host and database');
    try {
      const url = new URL(setup.databaseUrl);
      return `${url.host}${url.pathname}`;
    } catch {
      return '';
    }
  } finally {
    await client.end().catch(() => {});
  }
}
