/**
 * The attack suite's helpers. Each test gets its own migrated schema, a real executor built from
 * a config object the way `stepd start` builds it, and an attacker: a fresh non-superuser LOGIN
 * role granted `<schema>_client` (the role a deployment grants to its services), connecting on
 * its own pool. A bystander workflow of another user runs beside every attack so each test can
 * prove nothing else was disturbed and the executor still serves.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { expect } from 'vitest';
import type { StepdFileConfig } from '../../src/configFile.js';
import type { StepRow, WorkflowRow } from '../../src/db/tables.js';
import { DEFAULT_EXECUTOR_OPTIONS, Executor, type ExecutorOptions } from '../../src/executor/executor.js';
import { silentLogger, type Logger } from '../../src/logger.js';
import type { Secrets } from '../../src/secrets.js';
import type { ToolContext, ToolInfo, ToolProvider } from '../../src/tools/tool.js';
import { buildToolbox } from '../../src/tools/toolbox.js';
import {
  TEST_DATABASE_URL,
  createTestSchema,
  getSteps,
  getWorkflow,
  insertWorkflow,
  onCleanup,
  waitFor,
  waitForStep,
  waitForWorkflow,
  type TestSchema,
} from '../helpers/db.js';

export { getSteps, getWorkflow, insertWorkflow, onCleanup, waitFor, waitForStep, waitForWorkflow, type TestSchema };

/** The non-superuser service role that attacks: it holds `<schema>_client` and nothing else. */
export interface ClientRole {
  role: string;
  /** Its connection URL (trust auth, no password). */
  url: string;
  pool: pg.Pool;
  /** A statement on the client's pool; `stepd.` names the test schema. */
  q: <R extends pg.QueryResultRow = any>(text: string, values?: unknown[]) => Promise<R[]>;
  /**
   * Runs `fn` on a connection of its own that is thrown away afterwards, so session settings
   * an attack makes (`SET stepd.executor = 'on'`) cannot leak into other statements.
   */
  session: <T>(fn: (run: ClientRole['q']) => Promise<T>) => Promise<T>;
}

/** The two roles `migrate()` creates for a schema. */
export function schemaRoles(schema: string): { executor: string; client: string } {
  return { executor: `${schema}_executor`, client: `${schema}_client` };
}

async function dropRole(db: pg.Pool, role: string): Promise<void> {
  const exists = await db.query(`SELECT 1 FROM pg_roles WHERE rolname = $1`, [role]);
  if (exists.rowCount === 0) return;
  const ident = pg.escapeIdentifier(role);
  // Privileges the role holds in this database (CONNECT, schema usage) would block DROP ROLE.
  await db.query(`DROP OWNED BY ${ident}`);
  await db.query(`DROP ROLE IF EXISTS ${ident}`);
}

/** A fresh schema whose two stepd roles are dropped with it after the test. */
export async function createSecuredSchema(): Promise<TestSchema> {
  const t = await createTestSchema();
  onCleanup(async () => {
    await t.db.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(t.schema)} CASCADE`);
    const roles = schemaRoles(t.schema);
    await dropRole(t.db, roles.client).catch(() => {});
    await dropRole(t.db, roles.executor).catch(() => {});
    await dropRole(t.db, `${t.schema}_worker`).catch(() => {});
  });
  return t;
}

/**
 * Creates a LOGIN role (trust auth, no password) that is a member of `grantedRole` only (of no
 * role when null: no grants at all), dropped after the test (its connections ended first).
 * Returns its name and connection URL.
 */
export async function createLoginRole(t: TestSchema, grantedRole: string | null, name: string): Promise<{ role: string; url: string }> {
  const ident = pg.escapeIdentifier(name);
  await t.db.query(`CREATE ROLE ${ident} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
  onCleanup(async () => {
    await t.db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [name]).catch(() => {});
    await dropRole(t.db, name);
  });
  if (grantedRole !== null) await t.db.query(`GRANT ${pg.escapeIdentifier(grantedRole)} TO ${ident}`);
  return { role: name, url: connectionUrlFor(name) };
}

/** Creates `atk_<hex>` (LOGIN, trust auth), grants it `<schema>_client`, and connects as it. */
export async function createClientRole(t: TestSchema, opts: { name?: string } = {}): Promise<ClientRole> {
  const { role, url } = await createLoginRole(t, schemaRoles(t.schema).client, opts.name ?? `atk_${randomBytes(5).toString('hex')}`);
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  const run =
    (on: { query: pg.Pool['query'] }) =>
    async <R extends pg.QueryResultRow = any>(text: string, values?: unknown[]) =>
      (await on.query<R>(text.replaceAll('stepd.', `${t.schema}.`), values)).rows;
  return {
    role,
    url,
    pool,
    q: run(pool),
    session: async (fn) => {
      const conn = await pool.connect();
      try {
        return await fn(run(conn));
      } finally {
        conn.release(true);
      }
    },
  };
}

function connectionUrlFor(role: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.username = role;
  url.password = '';
  return url.toString();
}

/** Records every call it gets; `whoami` answers the user the step runs as. */
export class ProbeTools implements ToolProvider {
  readonly prefix = 'probe';
  readonly calls: { tool: string; args: unknown; user: string | null; workflowId: string }[] = [];

  async call(tool: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    this.calls.push({ tool, args, user: ctx.user, workflowId: ctx.workflowId });
    if (tool === 'whoami') return { user: ctx.user };
    if (tool === 'echo') return args ?? null;
    throw new Error(`probe has no tool ${tool}`);
  }

  async list(): Promise<ToolInfo[]> {
    return [{ name: 'whoami' }, { name: 'echo' }];
  }

  callsOf(workflowId: string): ProbeTools['calls'] {
    return this.calls.filter((c) => c.workflowId === String(workflowId));
  }
}

/**
 * A real executor built from a config object as `stepd start` builds it from stepd.config.json:
 * the toolbox (core, http with its egress policy, MCP servers, permissions, limits) plus the
 * config's `clients` and `caps`. Extra providers (the probe) are added to its registry.
 */
export async function startConfiguredExecutor(
  t: TestSchema,
  config: StepdFileConfig = {},
  opts: { providers?: ToolProvider[]; options?: Partial<ExecutorOptions>; log?: Logger; secrets?: Secrets } = {},
): Promise<Executor> {
  const log = opts.log ?? silentLogger();
  const toolbox = buildToolbox(config, undefined, log, opts.secrets ? { secrets: opts.secrets } : {});
  for (const p of opts.providers ?? []) toolbox.registry.add(p);
  const executor = new Executor(
    {
      ...DEFAULT_EXECUTOR_OPTIONS,
      databaseUrl: t.url,
      schema: t.schema,
      executorId: `sec-${randomBytes(4).toString('hex')}`,
      pollIntervalMs: 50,
      watchdogIntervalMs: 100,
      shutdownGraceMs: 2_000,
      ...opts.options,
    },
    {
      log,
      tools: toolbox.registry,
      permissions: toolbox.permissions,
      limits: toolbox.limits,
      ...(config.clients ? { clients: config.clients } : {}),
      ...(config.caps ? { caps: config.caps } : {}),
    },
  );
  await executor.start();
  onCleanup(async () => {
    await executor.stop({ graceMs: 0 });
    await toolbox.registry.close();
  });
  return executor;
}

export const BYSTANDER_FLOW = {
  start: 'approve',
  steps: {
    approve: { approval: true, next: 'work' },
    work: { tool: 'probe.whoami', done: true, output: '{{result}}' },
  },
};

/** Another user's workflow, waiting at a gate while the attacks run. */
export interface Bystander {
  id: string;
  /** Its rows are as they were, then it is approved and completes as its own user. */
  assertUndisturbedAndServed(): Promise<void>;
}

type Snapshot = { wf: Partial<WorkflowRow>; steps: Partial<StepRow>[] };

async function snapshot(t: TestSchema, id: string): Promise<Snapshot> {
  const wf = await getWorkflow(t, id);
  const steps = await getSteps(t, id);
  return {
    wf: { status: wf.status, flow: wf.flow, input: wf.input, created_by: wf.created_by, output: wf.output, error: wf.error },
    steps: steps.map((s) => ({ id: s.id, name: s.name, status: s.status, tool: s.tool, args: s.args, result: s.result, error: s.error })),
  };
}

export async function startBystander(t: TestSchema, probe: ProbeTools): Promise<Bystander> {
  const id = await insertWorkflow(t, BYSTANDER_FLOW, { who: 'bystander' }, { name: 'bystander', user: 'bystander' });
  const gate = await waitForStep(t, id, 'approve', 'pending');
  const before = await snapshot(t, id);
  return {
    id,
    async assertUndisturbedAndServed() {
      expect(await snapshot(t, id), 'the bystander workflow was touched').toEqual(before);
      await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
      const done = await waitForWorkflow(t, id);
      expect(done.status, JSON.stringify(done.error)).toBe('completed');
      expect(done.output).toEqual({ user: 'bystander' });
      expect(probe.callsOf(id).map((c) => c.user)).toEqual(['bystander']);
    },
  };
}

export interface SecurityEnv {
  /** The superuser's view (another service, fixtures, reading what happened). */
  t: TestSchema;
  client: ClientRole;
  executor: Executor;
  probe: ProbeTools;
  bystander: Bystander;
}

/** Schema + roles + executor (+ probe tools) + attacker + a bystander waiting at its gate. */
export async function securityEnv(
  opts: { config?: StepdFileConfig; providers?: ToolProvider[]; options?: Partial<ExecutorOptions>; clientName?: string; log?: Logger; secrets?: Secrets } = {},
): Promise<SecurityEnv> {
  const t = await createSecuredSchema();
  const probe = new ProbeTools();
  const executor = await startConfiguredExecutor(t, opts.config, {
    providers: [probe, ...(opts.providers ?? [])],
    options: opts.options ?? {},
    ...(opts.log ? { log: opts.log } : {}),
    ...(opts.secrets ? { secrets: opts.secrets } : {}),
  });
  const client = await createClientRole(t, opts.clientName ? { name: opts.clientName } : {});
  const bystander = await startBystander(t, probe);
  return { t, client, executor, probe, bystander };
}

/** The ways PostgreSQL refuses a client's write: a missing privilege, or the guard naming its rule. */
const REFUSAL_CODES = ['42501', '23514'];

/** The statement fails with a privilege error or a guard error whose message matches `rule`. */
export async function refused(promise: Promise<unknown>, rule: RegExp): Promise<{ code: string; message: string }> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e as { code?: string; message: string },
  );
  expect(err, `expected the write to be refused (${rule})`).toBeDefined();
  expect(REFUSAL_CODES, `unexpected error: ${err!.message}`).toContain(err!.code);
  expect(err!.message).toMatch(rule);
  return err as { code: string; message: string };
}

/** Inserts a workflow as the client role (plain contract insert) and returns its id. */
export async function clientInsert(
  client: ClientRole,
  flow: unknown,
  opts: { input?: unknown; user?: string | null; name?: string } = {},
): Promise<string> {
  const [row] = await client.q<{ id: string }>(
    `INSERT INTO stepd.workflows (name, flow, input, created_by) VALUES ($1, $2, $3, $4) RETURNING id`,
    [opts.name ?? 'attack', JSON.stringify(flow), JSON.stringify(opts.input ?? {}), opts.user ?? null],
  );
  return row!.id;
}

/** A one-step workflow inserted by the superuser completes: the executor is alive and serving. */
export async function assertServing(t: TestSchema): Promise<void> {
  const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { alive: true }, done: true, output: '{{result}}' } } });
  const wf = await waitForWorkflow(t, id);
  expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
  expect(wf.output).toEqual({ alive: true });
}

export interface LocalHttpServer {
  base: string;
  port: number;
  /** TCP connections accepted so far (an egress refusal must never open one). */
  connections(): number;
  requests: string[];
}

/**
 * A node:http server that counts connections; `handler` answers requests. It listens on
 * 127.0.0.1, or on `host` (`0.0.0.0`: every IPv4 address of the machine; `::`: every IPv6 one).
 */
export async function startLocalServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('{"secret":"internal"}'),
  opts: { host?: '127.0.0.1' | '0.0.0.0' | '::' } = {},
): Promise<LocalHttpServer> {
  const requests: string[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    requests.push(req.url ?? '/');
    handler(req, res);
  });
  server.on('connection', () => void connections++);
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen({ port: 0, host, ipv6Only: host === '::' }, resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  return { base: host === '::' ? `http://[::1]:${port}` : `http://127.0.0.1:${port}`, port, connections: () => connections, requests };
}

/** The error a workflow's failed step recorded (the first failed row). */
export async function failedStepError(t: TestSchema, workflowId: string): Promise<{ code: string; message: string } & Record<string, unknown>> {
  const step = await waitFor(async () => (await getSteps(t, workflowId)).find((s) => s.status === 'failed'), `a failed step of workflow ${workflowId}`);
  return step.error as unknown as { code: string; message: string } & Record<string, unknown>;
}

/** The row lock modes a client role may take with SELECT … FOR <mode>. */
export type RowLockMode = 'UPDATE' | 'NO KEY UPDATE' | 'SHARE' | 'KEY SHARE';

const ROW_LOCK_MODES: Record<RowLockMode, string> = { UPDATE: 'FOR UPDATE', 'NO KEY UPDATE': 'FOR NO KEY UPDATE', SHARE: 'FOR SHARE', 'KEY SHARE': 'FOR KEY SHARE' };

/**
 * A client session holding row `id` of `table` in an open transaction until `release()` (a
 * rollback, or `commit`): with a row lock (`mode`, FOR UPDATE by default), or with any statement
 * of its own (`hold`, e.g. a cancel left uncommitted). `pid` is the session's backend.
 */
export async function holdRow(
  pool: pg.Pool,
  t: TestSchema,
  id: string,
  opts: { table?: 'workflows' | 'workflow_steps'; mode?: RowLockMode; hold?: (conn: pg.PoolClient) => Promise<unknown> } = {},
): Promise<{ pid: number; release: (how?: 'ROLLBACK' | 'COMMIT') => Promise<void> }> {
  const conn = await pool.connect();
  let released = false;
  const release = async (how: 'ROLLBACK' | 'COMMIT' = 'ROLLBACK') => {
    if (released) return;
    released = true;
    try {
      await conn.query(how);
    } finally {
      conn.release(true);
    }
  };
  onCleanup(() => release().catch(() => {}));
  try {
    await conn.query('BEGIN');
    if (opts.hold) await opts.hold(conn);
    else await conn.query(`SELECT 1 FROM ${t.schema}.${opts.table ?? 'workflows'} WHERE id = $1 ${ROW_LOCK_MODES[opts.mode ?? 'UPDATE']}`, [id]);
    const { rows } = await conn.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return { pid: rows[0]!.pid, release };
  } catch (err) {
    // Refused (no privilege): nothing is held.
    await release().catch(() => {});
    throw err;
  }
}
