/**
 * Scenario 0, the floor: what the database itself allows for a one-step workflow's row work,
 * with no executor at all. A server-side loop (a PL/pgSQL DO block, one round trip for the whole
 * measurement, so neither the network, the driver nor a client's CPU is in the figure) does only
 * the rows' writes, a transaction per half as the executor does:
 *   1. take `batch` new workflows (oldest first, FOR UPDATE SKIP LOCKED), mark them running
 *      (counting their first step, as admission does), and insert their steps already claimed
 *      (`running`, with an executor id and a lease); COMMIT;
 *   2. finish those steps (`done`, a result, the lease cleared) and end the workflows
 *      (`completed`, an output); COMMIT;
 * until no new workflow is left. It runs on two shapes in the same run:
 *   - bare: tables with stepd's columns, defaults and NOT NULLs (CREATE TABLE … LIKE), only the
 *     primary keys and the one index the take reads (`workflows (id) WHERE status = 'new'`,
 *     as stepd has it): no trigger, no CHECK, no foreign key, no other index;
 *   - stepd: a schema made by the project's own `migrate`, written by a connection marked as the
 *     executor's (`stepd.executor=on`, `stepd.started_events=statement`) under
 *     `SET ROLE <schema>_executor`, so every trigger, CHECK and index meets it as it meets the
 *     executor.
 * The chain-hop floor does the same for one chain: per hop one transaction that finishes the
 * running step, inserts the next one claimed and counts it on the workflow row.
 * Not in either floor: the executor's NOTIFYs (step.started events, wake-ups), its reads (flow,
 * workflow cache misses) and its guards in the statements (live-step checks, fair lanes).
 *
 * Each shape runs twice per run in the order bare, stepd, stepd, bare (the second pass meets
 * the first pass's finished rows), and the faster pass of each counts: a floor is the best the
 * database did. Its backend's CPU (/proc) is read around each pass.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { schemaRoles } from '../../src/db/roles.js';
import { dropSchemaLater, newSchemaName, type Cleanup } from './pg.js';
import { clockTicksPerSecond, processCpuSeconds } from './procCpu.js';
import { NOOP_FLOW } from './throughput.js';

/** Workflows per half, as in the measurement. */
export const FLOOR_BATCH = 500;
const FLOOR_EXECUTOR = 'bench-floor';
const FLOOR_NAME = 'bench-floor';

export type FloorShapeName = 'bare' | 'stepd';

export interface FloorPass {
  workflows: number;
  elapsedMs: number;
  /** CPU of the backend that ran the loop. */
  backendCpuMs: number;
}

export interface FloorShapeResult {
  /** The faster pass. */
  workflowsPerSec: number;
  postgresMsPerWorkflow: number;
  hopMs: number;
  hopPostgresMs: number;
  passes: FloorPass[];
  hopPasses: FloorPass[];
}

export interface FloorResult {
  batch: number;
  workflows: number;
  hops: number;
  bare: FloorShapeResult;
  stepd: FloorShapeResult;
}

const ident = (name: string) => pg.escapeIdentifier(name);

function count(n: number, what: string): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${what} must be a positive integer (got ${n})`);
  return n;
}

function id(v: string): string {
  if (!/^\d+$/.test(v)) throw new Error(`not an id: ${v}`);
  return v;
}

/** The one-step workflow floor, in one DO block (values are checked numbers and generated names). */
export function workflowFloorSql(schema: string, batch: number): string {
  const s = ident(schema);
  return `DO $floor$
DECLARE
  wf bigint[];
  st bigint[];
BEGIN
  LOOP
    WITH taken AS (
      UPDATE ${s}.workflows w SET status = 'running', started_at = now(), updated_at = now(), step_count = w.step_count + 1
       WHERE w.id IN (SELECT id FROM ${s}.workflows WHERE status = 'new' ORDER BY id LIMIT ${count(batch, 'batch')} FOR UPDATE SKIP LOCKED)
      RETURNING w.id)
    SELECT array_agg(id) INTO wf FROM taken;
    EXIT WHEN wf IS NULL;
    WITH ins AS (
      INSERT INTO ${s}.workflow_steps (workflow_id, name, tool, args, status, attempt, ready_at, started_at, executor_id, lease_until)
      SELECT t.id, 'noop', 'core.noop', 'null'::jsonb, 'running', 1, now(), now(), '${FLOOR_EXECUTOR}', now() + interval '5 minutes'
        FROM unnest(wf) AS t(id)
      RETURNING id)
    SELECT array_agg(id) INTO st FROM ins;
    COMMIT;
    UPDATE ${s}.workflow_steps SET status = 'done', result = 'null'::jsonb, completed_at = now(), lease_until = NULL, updated_at = now()
     WHERE id = ANY (st) AND status = 'running';
    UPDATE ${s}.workflows SET status = 'completed', output = 'null'::jsonb, completed_at = now(), updated_at = now()
     WHERE id = ANY (wf) AND status = 'running';
    COMMIT;
  END LOOP;
END $floor$`;
}

/** The chain-hop floor: `hops` transactions, each finishing `stepId`'s successor chain by one. */
export function hopFloorSql(schema: string, workflowId: string, stepId: string, hops: number): string {
  const s = ident(schema);
  return `DO $floor$
DECLARE
  cur bigint := ${id(stepId)};
BEGIN
  FOR i IN 1..${count(hops, 'hops')} LOOP
    UPDATE ${s}.workflow_steps SET status = 'done', result = 'null'::jsonb, completed_at = now(), lease_until = NULL, updated_at = now()
     WHERE id = cur AND status = 'running';
    INSERT INTO ${s}.workflow_steps (workflow_id, name, tool, args, status, attempt, ready_at, started_at, executor_id, lease_until)
    VALUES (${id(workflowId)}, 'hop', 'core.noop', 'null'::jsonb, 'running', 1, now(), now(), '${FLOOR_EXECUTOR}', now() + interval '5 minutes')
    RETURNING id INTO cur;
    UPDATE ${s}.workflows SET step_count = step_count + 1, updated_at = now() WHERE id = ${id(workflowId)};
    COMMIT;
  END LOOP;
END $floor$`;
}

/** The bare shape beside `from` (a migrated stepd schema): its columns, nothing else but the keys and the take's index. */
export async function createBareTables(client: pg.Client, bare: string, from: string): Promise<void> {
  const [b, f] = [ident(bare), ident(from)];
  await client.query(`CREATE SCHEMA ${b}`);
  for (const t of ['workflows', 'workflow_steps']) {
    await client.query(`CREATE TABLE ${b}.${t} (LIKE ${f}.${t} INCLUDING DEFAULTS INCLUDING IDENTITY)`);
    await client.query(`ALTER TABLE ${b}.${t} ADD PRIMARY KEY (id)`);
  }
  await client.query(`CREATE INDEX ON ${b}.workflows (id) WHERE status = 'new'`);
}

/** `n` new one-step workflows, inserted as a client would (the stepd shape's client triggers run), then ANALYZE. */
export async function insertFloorWorkflows(client: pg.Client, schema: string, n: number): Promise<void> {
  const s = ident(schema);
  await client.query(
    `INSERT INTO ${s}.workflows (name, flow, input, created_by) SELECT $1, $2::jsonb, '{}'::jsonb, 'bench' FROM generate_series(1, $3::int)`,
    [FLOOR_NAME, JSON.stringify(NOOP_FLOW), count(n, 'workflows')],
  );
  await client.query(`ANALYZE ${s}.workflows, ${s}.workflow_steps`);
}

/** A connection that writes `schema` as the executor does: marked, and as `<schema>_executor`. */
export async function executorFloorClient(url: string, schema: string): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: url,
    options: `-c search_path=${schema},public -c stepd.executor=on -c stepd.started_events=statement`,
    application_name: 'stepd-bench-floor',
  });
  client.on('error', () => {});
  await client.connect();
  await client.query(`SET ROLE ${ident(schemaRoles(schema).executor)}`);
  return client;
}

export async function plainFloorClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'stepd-bench-floor' });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Runs `sql` on `client`, timing it and its backend's CPU. */
async function timed(client: pg.Client, sql: string, units: number): Promise<FloorPass> {
  const ticks = clockTicksPerSecond();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = rows[0]!.pid;
  const cpu0 = processCpuSeconds(pid, ticks);
  const t0 = performance.now();
  await client.query(sql);
  const elapsedMs = performance.now() - t0;
  const cpu1 = processCpuSeconds(pid, ticks);
  return { workflows: units, elapsedMs, backendCpuMs: cpu0 === undefined || cpu1 === undefined ? Number.NaN : (cpu1 - cpu0) * 1000 };
}

/** One pass of the workflow floor over `n` fresh workflows (inserted by `loader`, run by `writer`); checks they all ended. */
export async function workflowFloorPass(loader: pg.Client, writer: pg.Client, schema: string, n: number, batch = FLOOR_BATCH): Promise<FloorPass> {
  await insertFloorWorkflows(loader, schema, n);
  const pass = await timed(writer, workflowFloorSql(schema, batch), n);
  const { rows } = await loader.query<{ live: number }>(`SELECT count(*)::int AS live FROM ${ident(schema)}.workflows WHERE status <> 'completed'`);
  if (rows[0]!.live > 0) throw new Error(`the floor left ${rows[0]!.live} workflow(s) of ${schema} not completed`);
  return pass;
}

/** One pass of the hop floor: a workflow taken with its first step claimed (untimed), `hops` hops (timed), then ended. */
export async function hopFloorPass(loader: pg.Client, writer: pg.Client, schema: string, hops: number): Promise<FloorPass> {
  const s = ident(schema);
  const { rows: [w] } = await loader.query<{ id: string }>(
    `INSERT INTO ${s}.workflows (name, flow, input, created_by) VALUES ($1, $2::jsonb, '{}'::jsonb, 'bench') RETURNING id::text`,
    [`${FLOOR_NAME}-chain`, JSON.stringify(NOOP_FLOW)],
  );
  await writer.query(`UPDATE ${s}.workflows SET status = 'running', started_at = now(), updated_at = now(), step_count = 1 WHERE id = $1`, [w!.id]);
  const { rows: [first] } = await writer.query<{ id: string }>(
    `INSERT INTO ${s}.workflow_steps (workflow_id, name, tool, args, status, attempt, ready_at, started_at, executor_id, lease_until)
     VALUES ($1, 'hop', 'core.noop', 'null'::jsonb, 'running', 1, now(), now(), $2, now() + interval '5 minutes') RETURNING id::text`,
    [w!.id, FLOOR_EXECUTOR],
  );
  const pass = await timed(writer, hopFloorSql(schema, w!.id, first!.id, hops), hops);
  await writer.query(
    `UPDATE ${s}.workflow_steps SET status = 'done', result = 'null'::jsonb, completed_at = now(), lease_until = NULL, updated_at = now()
      WHERE workflow_id = $1 AND status = 'running'`,
    [w!.id],
  );
  await writer.query(`UPDATE ${s}.workflows SET status = 'completed', output = 'null'::jsonb, completed_at = now(), updated_at = now() WHERE id = $1`, [w!.id]);
  return pass;
}

function best(passes: FloorPass[], hopPasses: FloorPass[]): FloorShapeResult {
  const fast = passes.reduce((a, b) => (b.elapsedMs / b.workflows < a.elapsedMs / a.workflows ? b : a));
  const hop = hopPasses.reduce((a, b) => (b.elapsedMs / b.workflows < a.elapsedMs / a.workflows ? b : a));
  return {
    workflowsPerSec: (fast.workflows / fast.elapsedMs) * 1000,
    postgresMsPerWorkflow: fast.backendCpuMs / fast.workflows,
    hopMs: hop.elapsedMs / hop.workflows,
    hopPostgresMs: hop.backendCpuMs / hop.workflows,
    passes,
    hopPasses,
  };
}

export async function runFloor(opts: { url: string; cleanup: Cleanup; workflows: number; hops: number }): Promise<FloorResult> {
  const schema = newSchemaName('floor');
  const bare = `${schema}_bare`;
  const dropStepd = dropSchemaLater(opts.cleanup, opts.url, schema);
  const dropBare = dropSchemaLater(opts.cleanup, opts.url, bare);
  const clients: pg.Client[] = [];
  try {
    await migrate({ url: opts.url, schema });
    const loader = await plainFloorClient(opts.url);
    clients.push(loader);
    await createBareTables(loader, bare, schema);
    const writers: Record<FloorShapeName, { schema: string; client: pg.Client }> = {
      bare: { schema: bare, client: loader },
      stepd: { schema, client: await executorFloorClient(opts.url, schema) },
    };
    clients.push(writers.stepd.client);
    const passes: Record<FloorShapeName, FloorPass[]> = { bare: [], stepd: [] };
    const hopPasses: Record<FloorShapeName, FloorPass[]> = { bare: [], stepd: [] };
    for (const shape of ['bare', 'stepd', 'stepd', 'bare'] as const) {
      const w = writers[shape];
      passes[shape].push(await workflowFloorPass(loader, w.client, w.schema, opts.workflows));
      hopPasses[shape].push(await hopFloorPass(loader, w.client, w.schema, opts.hops));
    }
    return { batch: FLOOR_BATCH, workflows: opts.workflows, hops: opts.hops, bare: best(passes.bare, hopPasses.bare), stepd: best(passes.stepd, hopPasses.stepd) };
  } finally {
    for (const c of clients) await c.end().catch(() => {});
    await dropBare();
    await dropStepd();
  }
}
