/**
 * The daemon that `stepd start` runs, wired up: without DATABASE_URL the embedded PostgreSQL in
 * .stepd/ first, then the migrations, the executor with its tools, schedules (pg-boss), with
 * `--http` the dashboard, /mcp and /metrics, and webhooks. A composition root: it is the one place
 * that sees the executor, the HTTP server and the MCP handler together, so that `src/cli/` only
 * registers the command (src/cli/start.ts) and none of `cli/`, `http/` and `mcpServer/` imports
 * another. `stop()` stops the executor first, then the embedded server.
 */
import type { StartFlags } from '../config.js';
import { databaseUrlFrom } from '../config.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../db/embedded.js';
import { migrate } from '../db/migrate.js';
import type { Executor } from '../executor/executor.js';
import { httpSettingsFrom, type HttpFlags } from '../http/httpSettings.js';
import type { RunningHttpServer } from '../http/server.js';
import { createLogger, type Logger } from '../logger.js';
import type { Scheduler } from '../schedules/scheduler.js';
import { Secrets } from '../secrets.js';
import type { PromMetrics } from '../telemetry/promMetrics.js';
import { NO_TRACING, type StepTracing } from '../telemetry/stepTracing.js';
import { executorDepsFromConfig } from '../executorSettings.js';
import { DaemonStartError } from './daemonStartError.js';

export interface DaemonFlags extends StartFlags, HttpFlags {
  config?: string;
  dataDir?: string;
  /** false: this daemon runs no schedules (--no-schedules). */
  schedules?: boolean;
}

export interface RunningDaemon {
  log: Logger;
  /** The embedded PostgreSQL's URL, when this daemon uses one (no DATABASE_URL). */
  embeddedUrl: string | undefined;
  /** The database it executes on, and the schema. */
  url: string;
  schema: string;
  /** The dashboard's base URL, with --http. */
  httpUrl: string | undefined;
  /** The graceful stop: HTTP, schedules, webhooks, the executor (waiting for running steps), then the embedded PostgreSQL. */
  stop(): Promise<void>;
  /** On a deliberate second signal: abandon the running steps but still stop the embedded PostgreSQL. */
  abort: (() => Promise<void>) | undefined;
}

/**
 * Starts everything and returns once the executor runs. Bad settings throw as they are; a failure
 * once the database is known stops what had started and throws a {@link DaemonStartError}.
 * `dataDir`: the embedded PostgreSQL's folder, used when no database URL is given.
 */
export async function startDaemon(flags: DaemonFlags, dataDir: string): Promise<RunningDaemon> {
  // The executor, its tools and the MCP client load here, so the other commands start fast.
  const [{ executorOptionsFrom }, { Executor }, { buildToolbox, loadToolConfig, probeMcpServers }] = await Promise.all([
    import('../config.js'),
    import('../executor/executor.js'),
    import('../tools/toolbox.js'),
  ]);
  // The config's ${VAR} values are redacted from every log line, tool result and error.
  const secrets = new Secrets();
  const log = createLogger({ secrets });
  const file = await loadToolConfig(flags.config, process.cwd(), secrets);
  const toolbox = buildToolbox(file.config, file.path, log, { secrets });
  const limitConcurrency = toolbox.limits.concurrency;
  const given = databaseUrlFrom(flags.databaseUrl);
  const httpSettings = httpSettingsFrom(flags);
  // Settings are checked before anything is started.
  const options = executorOptionsFrom(
    { ...flags, ...(flags.concurrency === undefined && limitConcurrency !== undefined ? { concurrency: String(limitConcurrency) } : {}) },
    given ?? 'postgres://embedded',
  );
  const embedded = given ? undefined : await startEmbedded(dataDir, log);
  const url = given ?? embedded!.url;
  let executor: Executor | undefined;
  let http: RunningHttpServer | undefined;
  let scheduler: Scheduler | undefined;
  let notifications: { stop(): Promise<void> } | undefined;
  // /metrics (with --http) and traces (when OTEL_* asks for them): loaded only when used.
  let metrics: PromMetrics | undefined;
  let tracing: StepTracing = NO_TRACING;
  try {
    if (httpSettings) metrics = new (await import('../telemetry/promMetrics.js')).PromMetrics({ database: { databaseUrl: url, schema: options.schema, log } });
    tracing = await (await import('../telemetry/tracingFromEnv.js')).tracingFromEnv({ databaseUrl: url, schema: options.schema, executorId: options.executorId, log });
    const migrated = await migrate({ url, schema: options.schema, log });
    log.info({ schema: options.schema, applied: migrated.applied.length }, 'schema ready');
    if (file.path) log.info({ config: file.path, mcpServers: toolbox.mcp.map((p) => p.prefix) }, 'configuration loaded');
    if (toolbox.permissions.allowsEverything) log.info({}, 'no permissions configured: every user may call every tool');
    await probeMcpServers(toolbox, log);
    executor = new Executor({ ...options, databaseUrl: url }, { log, tools: toolbox.registry, permissions: toolbox.permissions, limits: toolbox.limits, ...executorDepsFromConfig(file.config), ...(metrics ? { metrics } : {}), tracing });
    await executor.start();
    await metrics?.start();
    // Schedules (pg-boss) start in the background: a pg-boss that cannot start never stops the executor.
    if (flags.schedules !== false) {
      const { Scheduler } = await import('../schedules/scheduler.js');
      scheduler = new Scheduler({ databaseUrl: url, schema: options.schema, log });
      scheduler.start();
    }
    if (httpSettings) {
      const { startDaemonHttp } = await import('./daemonHttp.js');
      http = await startDaemonHttp({
        ...httpSettings,
        databaseUrl: url,
        schema: options.schema,
        log,
        ...(file.config.api ? { api: file.config.api } : {}),
        permissions: toolbox.permissions,
        ...(file.config.caps ? { caps: file.config.caps } : {}),
        listTools: async (servers) => (await import('../mcpServer/listAllTools.js')).listAllTools(toolbox, { servers }),
        toolLookup: toolLookupOf(toolbox, (await import('../tools/toolCatalog.js')).ToolCatalog),
        ...(metrics ? { metrics: metrics.handler() } : {}),
      });
    }
    // Webhooks (config notify) through pg-boss, in the background like schedules.
    if (file.config.notify?.length) notifications = (await import('../notify/startNotifications.js')).startNotifications({ databaseUrl: url, schema: options.schema, log, hooks: file.config.notify, links: file.config.approvalLinks, httpUrl: http?.url, http: file.config.http, ...(metrics ? { metrics: metrics.notifications } : {}) });
  } catch (err) {
    await http?.close().catch(() => {});
    await notifications?.stop().catch(() => {});
    await scheduler?.stop().catch(() => {});
    await executor?.stop({ graceMs: 0 }).catch(() => {});
    await metrics?.close().catch(() => {});
    await tracing.shutdown().catch(() => {});
    await toolbox.registry.close().catch(() => {});
    await embedded?.stop().catch((e: unknown) => log.error({ err: e }, 'could not stop the embedded PostgreSQL'));
    throw new DaemonStartError('services', url, err);
  }
  const running = executor;
  const served = http;
  return {
    log,
    embeddedUrl: embedded?.url,
    url,
    schema: options.schema,
    httpUrl: served?.url,
    stop: async () => {
      try {
        await served?.close().catch((err: unknown) => log.error({ err }, 'could not stop the http server'));
        await scheduler?.stop().catch((err: unknown) => log.error({ err }, 'could not stop the schedules'));
        await notifications?.stop().catch((err: unknown) => log.error({ err }, 'could not stop the notifications'));
        await running.stop();
        await metrics?.close().catch((err: unknown) => log.error({ err }, 'could not close the metrics'));
        await tracing.shutdown().catch((err: unknown) => log.error({ err }, 'could not export the last trace spans'));
        await toolbox.registry.close();
      } finally {
        await embedded?.stop();
      }
    },
    abort: embedded ? () => embedded.stop() : undefined,
  };
}

/** Each check lists the daemon's tools afresh (its MCP servers are already connected). */
function toolLookupOf(toolbox: import('../tools/toolbox.js').Toolbox, Catalog: typeof import('../tools/toolCatalog.js').ToolCatalog) {
  return () => new Catalog(toolbox);
}

async function startEmbedded(dataDir: string, log: Logger): Promise<EmbeddedPostgres> {
  log.info({ dataDir }, 'no DATABASE_URL: starting the embedded PostgreSQL');
  try {
    return await startEmbeddedPostgres({ dataDir, log });
  } catch (err) {
    throw new DaemonStartError('embedded', dataDir, err);
  }
}
