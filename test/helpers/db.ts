/**
 * Integration-test helpers: each test gets its own schema in the `test` database, migrated
 * fresh; workflows are driven only through the SQL contract from a separate (client) pool,
 * as another service would.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { Executor, DEFAULT_EXECUTOR_OPTIONS, type ExecutorOptions } from '../../src/executor/executor.js';
import { silentLogger, type Logger } from '../../src/logger.js';
import type { LlmConfig } from '../../src/tools/llm/llmConfig.js';
import type { ExecutorMetrics } from '../../src/telemetry/executorMetrics.js';
import { CoreTools } from '../../src/tools/builtins.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import type { StepPolicy } from '../../src/executor/steps/runStep.js';
import type { LimitPolicy } from '../../src/tools/limits.js';
import type { RatePolicy } from '../../src/tools/rates.js';
import type { CapsConfig, ClientsConfig } from '../../src/configFile.js';
import type { StepRow, WorkflowRow } from '../../src/db/tables.js';

export const TEST_DATABASE_URL = process.env.STEPD_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    await fn().catch(() => {});
  }
});

/** Registers a cleanup that runs after the current test, last registered first. */
export function onCleanup(fn: () => Promise<void>): void {
  cleanups.push(fn);
}

/** Drops a test schema and its two roles (roles are cluster-wide: they outlive the schema otherwise). */
export async function dropSchemaAndRoles(db: pg.Pool | pg.Client, schema: string): Promise<void> {
  await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await db.query(`DROP SCHEMA IF EXISTS ${schema}_boss CASCADE`).catch(() => {});
  await db.query(`DROP ROLE IF EXISTS ${schema}_executor`).catch(() => {});
  await db.query(`DROP ROLE IF EXISTS ${schema}_client`).catch(() => {});
  await db.query(`DROP ROLE IF EXISTS ${schema}_worker`).catch(() => {});
}

export interface TestSchema {
  schema: string;
  url: string;
  /** A plain client pool: no executor marker, no search_path (like any other service). */
  db: pg.Pool;
  q: <R extends pg.QueryResultRow = any>(text: string, values?: unknown[]) => Promise<R[]>;
}

export async function createTestSchema(): Promise<TestSchema> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await migrate({ url: TEST_DATABASE_URL, schema });
  const db = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4 });
  db.on('error', () => {});
  onCleanup(async () => {
    await dropSchemaAndRoles(db, schema);
    await db.end();
  });
  const q = async <R extends pg.QueryResultRow = any>(text: string, values?: unknown[]) =>
    (await db.query<R>(text.replaceAll('stepd.', `${schema}.`), values)).rows;
  return { schema, url: TEST_DATABASE_URL, db, q };
}

export interface TestExecutorOptions extends Partial<ExecutorOptions> {
  tools?: ToolProvider[];
  permissions?: StepPolicy;
  /** Per-tool-pattern and per-user maximums (`createLimitPolicy(...)`). */
  limits?: LimitPolicy;
  /** Config `clients`: which users each database role may start workflows as. */
  clients?: ClientsConfig;
  /** Config `caps`: what flows may ask for. */
  caps?: CapsConfig;
  /** Config `llm`: its cost budgets per user. */
  llm?: LlmConfig;
  /** Default: a silent logger. */
  log?: Logger;
  /** Default: none. */
  metrics?: ExecutorMetrics;
  /** Config `limits.rates` (`ratePolicy(...)`). */
  rates?: RatePolicy;
}

/** An in-process executor with fast intervals, stopped after the test. */
export async function startExecutor(t: TestSchema, opts: TestExecutorOptions = {}): Promise<Executor> {
  const { tools = [], permissions, limits, clients, caps, llm, log, metrics, rates, ...rest } = opts;
  const executor = new Executor(
    {
      ...DEFAULT_EXECUTOR_OPTIONS,
      databaseUrl: t.url,
      schema: t.schema,
      executorId: `test-${randomBytes(4).toString('hex')}`,
      pollIntervalMs: 50,
      watchdogIntervalMs: 100,
      shutdownGraceMs: 2_000,
      ...rest,
    },
    { log: log ?? silentLogger(), tools: new ToolRegistry([new CoreTools(), ...tools]), ...(permissions ? { permissions } : {}), ...(limits ? { limits } : {}), ...(clients ? { clients } : {}), ...(caps ? { caps } : {}), ...(llm ? { llm } : {}), ...(metrics ? { metrics } : {}), ...(rates ? { rates } : {}) },
  );
  await executor.start();
  onCleanup(() => executor.stop({ graceMs: 0 }));
  return executor;
}

/** Runs statements as the executor would (stepd.executor=on), to build fixtures without a daemon. */
export async function asExecutor<R extends pg.QueryResultRow = any>(t: TestSchema, text: string, values?: unknown[]): Promise<R[]> {
  const client = await t.db.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SET LOCAL stepd.executor = 'on'`);
    const { rows } = await client.query<R>(text.replaceAll('stepd.', `${t.schema}.`), values);
    await client.query('COMMIT');
    return rows;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}

/** Polls until `condition` returns something truthy; never a fixed sleep. */
export async function waitFor<T>(condition: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 15));
  }
}

export async function insertWorkflow(
  t: TestSchema,
  flow: unknown,
  input: unknown = {},
  opts: { name?: string; user?: string; key?: string } = {},
): Promise<string> {
  const rows = await t.q<{ id: string }>(
    `INSERT INTO stepd.workflows (name, flow, input, created_by, key) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [opts.name ?? 'test', JSON.stringify(flow), JSON.stringify(input), opts.user ?? null, opts.key ?? null],
  );
  return rows[0]!.id;
}

export async function getWorkflow(t: TestSchema, id: string): Promise<WorkflowRow> {
  const rows = await t.q<WorkflowRow>(`SELECT * FROM stepd.workflows WHERE id = $1`, [id]);
  return rows[0]!;
}

export async function getSteps(t: TestSchema, workflowId: string): Promise<StepRow[]> {
  return t.q<StepRow>(`SELECT * FROM stepd.workflow_steps WHERE workflow_id = $1 ORDER BY id`, [workflowId]);
}

/** Waits until the workflow is in one of `statuses` (terminal by default) and returns it. */
export async function waitForWorkflow(
  t: TestSchema,
  id: string,
  statuses: string[] = ['completed', 'failed', 'cancelled'],
  timeoutMs?: number,
): Promise<WorkflowRow> {
  return waitFor(
    async () => {
      const wf = await getWorkflow(t, id);
      return statuses.includes(wf.status) ? wf : undefined;
    },
    `workflow ${id} to be ${statuses.join('/')}`,
    timeoutMs,
  );
}

/** Waits for a step row matching name and status, returning it. */
export async function waitForStep(t: TestSchema, workflowId: string, name: string, status: string): Promise<StepRow> {
  return waitFor(
    async () => (await getSteps(t, workflowId)).find((s) => s.name === name && s.status === status),
    `step ${name} of workflow ${workflowId} to be ${status}`,
  );
}
