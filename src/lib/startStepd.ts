/**
 * `startStepd()`: the executor inside an application's own Node process (DESIGN.md §4b), with
 * in-process tools written as functions. The same executor as `stepd start`: it migrates the
 * schema (or only checks it), builds the toolbox from the config (MCP servers, permissions,
 * limits, caps) with the function tools added as providers of the same registry, and returns a
 * handle with the typed client helpers and a two-stage `stop()`.
 */
import os from 'node:os';
import { callerUser } from '../api/callerUser.js';
import { executorOptionsFrom, type StartFlags } from '../config.js';
import { loadConfigFile, parseConfigFile, RESERVED_SERVER_NAMES, type StepdFileConfig } from '../configFile.js';
import { createKysely, createPool } from '../db/connect.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../db/embedded.js';
import { migrate } from '../db/migrate.js';
import { pendingMigrations } from '../db/schemaCheck.js';
import { Executor } from '../executor/executor.js';
import { executorDepsFromConfig } from '../executorSettings.js';
import { resolveCaps } from '../flow/caps.js';
import { createLogger, type Logger } from '../logger.js';
import { Secrets } from '../secrets.js';
import { stopOnSignals } from '../stopOnSignals.js';
import type { FunctionTools, TypedFunctionTools } from '../tools/functionTool.js';
import { functionToolProviders } from '../tools/functionToolProvider.js';
import { buildToolbox } from '../tools/toolbox.js';
import type { SentSignal, StartedWorkflow, WorkflowDetails } from '../api/operationTypes.js';
import type { WorkflowStatus } from '../db/tables.js';
import type { SendSignalOptions, StartWorkflowOptions } from './clientOptions.js';
import { StepdClient } from './stepdClient.js';
import type { WaitOptions } from './workflowWaits.js';
import type { WorkflowOutcome } from './workflowOutcome.js';

export interface StepdOptions<Args extends Record<string, unknown> = Record<string, unknown>> {
  /** The PostgreSQL to use (default: $DATABASE_URL). Without one, `embedded: true` is needed. */
  databaseUrl?: string;
  /** Start the embedded PostgreSQL (in `dataDir`, default .stepd) when no database URL is given. */
  embedded?: boolean | { dataDir?: string };
  /** The schema holding the tables (default: $STEPD_SCHEMA, else "stepd"). */
  schema?: string;
  /** In-process tools: `{ "billing.charge": { input?: zodSchema, run: async (args, ctx) => result } }` (args typed from input). */
  tools?: TypedFunctionTools<Args>;
  /** The configuration (as in stepd.config.json: mcpServers, permissions, limits, caps, …), or the path of such a file. */
  config?: StepdFileConfig | string;
  /** false: do not migrate, only check that the schema is up to date (fail if not). Default true. */
  migrate?: boolean;
  /** This executor's identity, unique per running executor (default: $STEPD_EXECUTOR_ID, else host name and pid). */
  executorId?: string;
  /** Tool calls in flight at once (default: the config's limits.concurrency, else 256). */
  concurrency?: number;
  /** How long stop() waits for running steps before aborting them (default 30 s). */
  shutdownGraceMs?: number;
  /** Fallback poll when no wake-up arrives (default 1 s). */
  pollIntervalMs?: number;
  /** The user `startWorkflow` and `sendSignal` act as when not told (default: $STEPD_USER, else the OS user). */
  user?: string;
  /** A pino logger (default: JSON lines on stderr at $STEPD_LOG_LEVEL, else "warn"). */
  logger?: Logger;
  /** Stop gracefully on the first SIGINT/SIGTERM, exit at once on a second (default false: the application decides). */
  handleSignals?: boolean;
}

/** A running stepd: the client helpers (src/lib/stepdClient.ts) and stop(). */
export interface Stepd {
  readonly databaseUrl: string;
  readonly schema: string;
  readonly executorId: string;
  /** Starts a workflow through the SQL contract, after checking the flow and the user's tool permissions. */
  startWorkflow<Input extends Record<string, unknown>>(opts: StartWorkflowOptions<Input>): Promise<StartedWorkflow>;
  /** Sends a signal: the steps waiting for it go on. */
  sendSignal<Payload extends Record<string, unknown>>(opts: SendSignalOptions<Payload>): Promise<SentSignal>;
  /** Resolves once the workflow has ended, as its row says (a failed one too: look at `status`). */
  waitForWorkflow<Output = unknown>(workflowId: string | number, opts?: WaitOptions): Promise<WorkflowOutcome<Output>>;
  /** A workflow with its steps (every attempt) and what it waits for. */
  getWorkflow(workflowId: string | number): Promise<WorkflowDetails>;
  /** Cancels a workflow that has not ended (its running steps are aborted). */
  cancelWorkflow(workflowId: string | number, opts?: { user?: string }): Promise<{ workflowId: string; status: WorkflowStatus }>;
  /**
   * Stops claiming, waits up to the grace period (`graceMs`, default shutdownGraceMs) for running
   * steps, then aborts the rest through their signal and hands them back without spending an
   * attempt; then closes the connections (and the embedded PostgreSQL it started). Idempotent.
   */
  stop(opts?: { graceMs?: number }): Promise<void>;
}

export async function startStepd<Args extends Record<string, unknown> = Record<string, unknown>>(options: StepdOptions<Args> = {}): Promise<Stepd> {
  const secrets = new Secrets();
  const log = options.logger ?? createLogger({ secrets, level: process.env.STEPD_LOG_LEVEL ?? 'warn' });
  const config = await configOf(options.config, secrets);
  const providers = functionToolProviders((options.tools ?? {}) as FunctionTools);
  const takenBy = new Map<string, string>([
    ...RESERVED_SERVER_NAMES.map((n) => [n, 'the built-in tools'] as const),
    ...Object.keys(config.mcpServers ?? {}).map((n) => [n, 'an MCP server of the config'] as const),
    ...Object.keys(config.workers ?? {}).map((n) => [n, 'the workers of the config (served by worker processes)'] as const),
  ]);
  const clash = providers.find((p) => takenBy.has(p.prefix));
  if (clash) throw new TypeError(`tools: the prefix "${clash.prefix}" is taken (by ${takenBy.get(clash.prefix)}); choose another`);
  const given = options.databaseUrl ?? process.env.DATABASE_URL;
  if (!given && !options.embedded) {
    throw new TypeError('startStepd: no database: pass databaseUrl (or set DATABASE_URL), or embedded: true to run an embedded PostgreSQL');
  }
  const toolbox = buildToolbox(config, typeof options.config === 'string' ? options.config : undefined, log, { secrets, providers });
  const flags: StartFlags = {
    ...(options.schema !== undefined ? { schema: options.schema } : {}),
    executorId: options.executorId ?? process.env.STEPD_EXECUTOR_ID ?? `${os.hostname()}-${process.pid}`,
    ...(options.concurrency !== undefined ? { concurrency: String(options.concurrency) } : toolbox.limits.concurrency !== undefined ? { concurrency: String(toolbox.limits.concurrency) } : {}),
    ...(options.shutdownGraceMs !== undefined ? { shutdownGrace: `${options.shutdownGraceMs}ms` } : {}),
    ...(options.pollIntervalMs !== undefined ? { pollInterval: `${options.pollIntervalMs}ms` } : {}),
  };
  const settings = executorOptionsFrom(flags, given ?? 'postgres://embedded');
  let embedded: EmbeddedPostgres | undefined;
  let executor: Executor | undefined;
  const cleanup = async () => {
    await executor?.stop({ graceMs: 0 }).catch(() => {});
    await toolbox.registry.close().catch(() => {});
    await embedded?.stop().catch(() => {});
  };
  try {
    if (!given) {
      const dataDir = (typeof options.embedded === 'object' ? options.embedded.dataDir : undefined) ?? process.env.STEPD_DATA_DIR ?? '.stepd';
      embedded = await startEmbeddedPostgres({ dataDir, log });
    }
    const url = given ?? embedded!.url;
    if (options.migrate === false) {
      const pending = await pendingMigrations({ url, schema: settings.schema });
      if (pending.length > 0) throw new Error(`schema ${settings.schema} is not up to date: ${pending.length} migration(s) pending (${pending[0]} …); run \`stepd migrate\` or start with migrate: true`);
    } else {
      await migrate({ url, schema: settings.schema, log });
    }
    executor = new Executor(
      { ...settings, databaseUrl: url },
      {
        log,
        tools: toolbox.registry,
        permissions: toolbox.permissions,
        limits: toolbox.limits,
        ...executorDepsFromConfig(config),
      },
    );
    await executor.start();
    const running = executor;
    const pool = createPool({ url, schema: settings.schema, role: 'client', max: 4, applicationName: 'stepd-library' });
    const db = createKysely(pool);
    const client = new StepdClient({
      url,
      schema: settings.schema,
      pool,
      db,
      log,
      user: callerUser(options.user) ?? 'stepd',
      permissions: toolbox.permissions,
      caps: resolveCaps(config.caps),
    });
    let stopped: Promise<void> | undefined;
    const stop = (opts: { graceMs?: number } = {}): Promise<void> =>
      (stopped ??= (async () => {
        try {
          await client.close();
          await running.stop(opts);
          await db.destroy();
          await toolbox.registry.close();
        } finally {
          await embedded?.stop();
        }
      })());
    if (options.handleSignals) stopOnSignals(stop, log);
    return {
      databaseUrl: url,
      schema: settings.schema,
      executorId: settings.executorId,
      startWorkflow: (o) => client.startWorkflow(o),
      sendSignal: (o) => client.sendSignal(o),
      waitForWorkflow: (id, o) => client.waitForWorkflow(id, o),
      getWorkflow: (id) => client.getWorkflow(id),
      cancelWorkflow: (id, o) => client.cancelWorkflow(id, o),
      stop,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function configOf(config: StepdOptions['config'], secrets: Secrets): Promise<StepdFileConfig> {
  if (config === undefined) return {};
  if (typeof config === 'string') return loadConfigFile(config, process.env, secrets);
  return parseConfigFile(config, process.env, 'startStepd({ config })', secrets);
}
