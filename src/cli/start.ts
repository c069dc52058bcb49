/**
 * `stepd start`: the daemon. Without DATABASE_URL it first starts the embedded PostgreSQL in
 * .stepd/ (DESIGN.md §6) and prints its URL; then migrates and runs the executor until
 * SIGINT/SIGTERM. Stopping stops the executor first, then the embedded server.
 */
import { ratePolicy } from '../tools/rates.js';
import type { Command } from 'commander';
import type { StartFlags } from '../config.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../db/embedded.js';
import { migrate } from '../db/migrate.js';
import type { Executor } from '../executor/executor.js';
import type { Scheduler } from '../schedules/scheduler.js';
import { createLogger, type Logger } from '../logger.js';
import { databaseUrlFrom } from '../config.js';
import { Secrets } from '../secrets.js';
import { httpSettingsFrom, type HttpFlags } from '../http/httpSettings.js';
import type { RunningHttpServer } from '../http/server.js';
import type { PromMetrics } from '../telemetry/promMetrics.js';
import { NO_TRACING, type StepTracing } from '../telemetry/stepTracing.js';
import { CliError, EXIT, dataDirFrom, isConnectionError, out, toCliError } from './common.js';
import { redactUrl } from '../api/views/format.js';
import { waitForStop } from '../waitForStop.js';

export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run the executor daemon (applies migrations first); without DATABASE_URL, on an embedded PostgreSQL in .stepd/')
    .option('--database-url <url>', 'PostgreSQL URL (default: $DATABASE_URL; without one, the embedded PostgreSQL)')
    .option('--data-dir <dir>', 'folder of the embedded PostgreSQL (default: $STEPD_DATA_DIR or .stepd)')
    .option('--schema <name>', 'schema holding the tables (default: $STEPD_SCHEMA or stepd)')
    .option('--executor-id <id>', 'this executor\'s identity; unique per running executor (default: host name)')
    .option('--concurrency <n>', 'tool calls in flight at once (default: 256; see docs/limits-and-fairness.md)')
    .option('--poll-interval <duration>', 'fallback poll when no wake-up arrives (default: 1s)')
    .option('--watchdog-interval <duration>', 'how often dead executors, stuck steps, gate and workflow deadlines are checked (default: 2s)')
    .option('--lease-grace <duration>', 'added to a step\'s timeout before the watchdog rescues it (default: 30s)')
    .option('--shutdown-grace <duration>', 'how long a stop waits for running steps (default: 30s)')
    .option('--heartbeat-interval <duration>', 'how often this executor marks itself alive (default: 2s; $STEPD_HEARTBEAT_INTERVAL)')
    .option('--dead-after <duration>', 'an executor silent this long counts as dead and its running steps are re-run (default: 15s; $STEPD_DEAD_AFTER)')
    .option('--config <path>', 'configuration file: MCP servers, permissions, limits (default: ./stepd.config.json if present)')
    .option('--no-events', 'do not NOTIFY lifecycle events on stepd_events')
    .option('--no-schedules', 'do not run schedules (pg-boss) in this daemon; other daemons on the schema still do (docs/schedules.md)')
    .option('--http <port>', 'serve the dashboard, /mcp and /metrics on this port (0: any free port; default: $STEPD_HTTP, else no HTTP)')
    .option('--http-host <host>', 'address the HTTP server listens on (default: $STEPD_HTTP_HOST or 127.0.0.1)')
    .option('--user <name>', 'who HTTP requests act as when the config has no api.tokens (loopback only; default: $STEPD_USER, else your OS user)')
    .addHelpText(
      'after',
      `
Examples:
  stepd start                                   # embedded PostgreSQL in ./.stepd, prints its URL
  DATABASE_URL=postgres://localhost/app stepd start
  stepd start --database-url postgres://localhost/app --concurrency 64 --schema jobs
  stepd start --http 8080                       # dashboard at http://127.0.0.1:8080/ (docs/dashboard.md)

Without DATABASE_URL the first start initialises a PostgreSQL cluster in .stepd/ (a few
seconds), later starts reuse it. Other commands run in the same folder find it; psql and other
services connect with the printed DATABASE_URL.

The first SIGINT/SIGTERM stops claiming and waits for running steps, then stops the embedded
PostgreSQL. A second one within 1.5 s is the copy of a Ctrl-C that npm forwards, and is ignored;
a later one exits at once, after stopping the embedded PostgreSQL (running steps are re-run by
the next start; the data stays intact).
Another \`stepd start\` in the same folder (with its own --executor-id) uses the embedded
PostgreSQL of the first; only the last one to stop stops it.`,
    )
    .action(async (flags: StartFlags & HttpFlags & { config?: string; dataDir?: string }) => {
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
      const embedded = given ? undefined : await startEmbedded(dataDirFrom(flags.dataDir), log);
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
        executor = new Executor({ ...options, databaseUrl: url }, { log, tools: toolbox.registry, permissions: toolbox.permissions, limits: toolbox.limits, rates: ratePolicy(file.config.limits?.rates), ...(file.config.clients ? { clients: file.config.clients } : {}), ...(file.config.caps ? { caps: file.config.caps } : {}), ...(file.config.llm ? { llm: file.config.llm } : {}), ...(file.config.retention ? { retention: file.config.retention } : {}), ...(metrics ? { metrics } : {}), tracing });
        await executor.start();
        await metrics?.start();
        // Schedules (pg-boss) start in the background: a pg-boss that cannot start never stops the executor.
        if ((flags as { schedules?: boolean }).schedules !== false) {
          const { Scheduler } = await import('../schedules/scheduler.js');
          scheduler = new Scheduler({ databaseUrl: url, schema: options.schema, log });
          scheduler.start();
        }
        if (httpSettings) {
          const { startDaemonHttp } = await import('../http/daemonHttp.js');
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
        if (file.config.notify?.length) notifications = (await import('../notify/startNotifications.js')).startNotifications({ databaseUrl: url, schema: options.schema, log, hooks: file.config.notify, links: file.config.approvalLinks, httpUrl: http?.url });
      } catch (err) {
        await http?.close().catch(() => {});
        await notifications?.stop().catch(() => {});
        await scheduler?.stop().catch(() => {});
        await executor?.stop({ graceMs: 0 }).catch(() => {});
        await metrics?.close().catch(() => {});
        await tracing.shutdown().catch(() => {});
        await toolbox.registry.close().catch(() => {});
        await embedded?.stop().catch((e: unknown) => log.error({ err: e }, 'could not stop the embedded PostgreSQL'));
        throw isConnectionError(err) ? new CliError(`cannot reach the database at ${redactUrl(url)}: ${(err as Error).message}`, EXIT.unreachable) : toCliError(err);
      }
      const running = executor;
      // Ready is announced once the signal handlers are in place: a supervisor that signals as
      // soon as it reads the line must get a clean stop, not the default death by signal.
      const announceReady = () => {
        if (embedded) out(`stepd: embedded PostgreSQL ready — DATABASE_URL=${embedded.url}`);
        else out(`stepd: ready — executing workflows of schema ${options.schema} on ${redactUrl(url)}`);
        if (http) out(`stepd: dashboard at ${http.url}/ (MCP at ${http.url}/mcp, metrics at ${http.url}/metrics)`);
      };
      await waitForStop({
        stop: async () => {
          try {
            await http?.close().catch((err: unknown) => log.error({ err }, 'could not stop the http server'));
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
        // A deliberate second signal: abandon the running steps but still stop the embedded PostgreSQL.
        ...(embedded ? { abort: () => embedded.stop() } : {}),
        log,
        listening: announceReady,
      });
    });
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
    throw new CliError(`could not start the embedded PostgreSQL in ${dataDir}: ${(err as Error).message}\n  (or set DATABASE_URL to use your own PostgreSQL)`, EXIT.unreachable);
  }
}
