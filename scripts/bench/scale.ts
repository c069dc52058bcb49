/**
 * Scenario 5, scale: the claim statement's latency on a table with no finished rows and on one
 * with N finished (`done`) step rows, both with 1,000 ready steps to claim from. The rows are
 * bulk-loaded with generate_series over an executor-role connection (stepd.executor=on, so the
 * guard allows it), spread over 1,000 completed workflows (present in both states, so only the
 * step rows differ), then VACUUM ANALYZE (what autovacuum would do on its own).
 *
 * Each sample is one claim, exactly as the executor sends it (prepared, on a fresh
 * connection per batch), inside a transaction that is rolled back, timed from the harness;
 * the two states alternate claim by claim. One batch per run; each batch also records EXPLAIN
 * ANALYZE's execution time in both states.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { claimStatement, defaultClaimLimit, type ClaimStatement } from './claimStatement.js';
import { dropSchemaLater, executorRoleClient, newSchemaName, type Cleanup } from './pg.js';
import { summarize, type LatencySummary } from './stats.js';

export interface ClaimBatch {
  latencyMs: LatencySummary;
  /** EXPLAIN (ANALYZE) "Execution Time" of one claim, server side. */
  explainExecutionMs: number;
  /** The plan reads the partial ready index. */
  usesReadyIndex: boolean;
}

export interface ScaleResult {
  finishedRows: number;
  readyRows: number;
  claimLimit: number;
  statementSource: ClaimStatement['source'];
  loadSeconds: number;
  empty: ClaimBatch[];
  loaded: ClaimBatch[];
}

const READY_ROWS = 1_000;
const WORKFLOWS = 1_000;

async function insertReadySteps(client: pg.Client): Promise<void> {
  const [wf] = (await client.query<{ id: string }>(`INSERT INTO workflows (name, flow, status, started_at) VALUES ('bench-scale-ready', $1, 'running', now()) RETURNING id`, [
    JSON.stringify({ start: 'noop', steps: { noop: { tool: 'core.noop' } } }),
  ])).rows;
  await client.query(
    `INSERT INTO workflow_steps (workflow_id, name, tool, args, status, ready_at)
     SELECT $1, 'noop', 'core.noop', '{}', 'ready', now() - interval '1 second' FROM generate_series(1, $2::int)`,
    [wf!.id, READY_ROWS],
  );
}

/** The finished workflows exist in both states, so only the step rows differ between them. */
async function insertFinishedWorkflows(client: pg.Client): Promise<void> {
  await client.query(
    `INSERT INTO workflows (name, flow, status, started_at, completed_at, output)
     SELECT 'bench-scale-done', $1, 'completed', now(), now(), 'null' FROM generate_series(1, $2::int)`,
    [JSON.stringify({ start: 'noop', steps: { noop: { tool: 'core.noop', done: true } } }), WORKFLOWS],
  );
}

async function loadFinishedSteps(client: pg.Client, rows: number): Promise<void> {
  await client.query(
    `WITH ids AS (SELECT array_agg(id ORDER BY id) AS a FROM workflows WHERE name = 'bench-scale-done')
     INSERT INTO workflow_steps (workflow_id, name, tool, args, result, status, attempt, ready_at, started_at, completed_at, executor_id)
     SELECT ids.a[1 + g % $2::int], 'noop', 'core.noop', '{}', 'null', 'done', 1, now(), now(), now(), 'bench'
       FROM ids, generate_series(1, $1::int) AS g`,
    [rows, WORKFLOWS],
  );
}

/** One timed claim, rolled back. */
async function timeClaim(client: pg.Client, stmt: ClaimStatement): Promise<number> {
  await client.query('BEGIN');
  const t0 = performance.now();
  const r = await client.query({ ...(stmt.name ? { name: stmt.name } : {}), text: stmt.text, values: stmt.values });
  const ms = performance.now() - t0;
  await client.query('ROLLBACK');
  if (r.rowCount === 0) throw new Error('the claim statement claimed nothing: the scale scenario is set up wrong');
  return ms;
}

async function explainClaim(client: pg.Client, stmt: ClaimStatement): Promise<{ executionMs: number; usesReadyIndex: boolean }> {
  await client.query('BEGIN');
  const plan = await client.query<{ 'QUERY PLAN': unknown }>({ text: `EXPLAIN (ANALYZE, FORMAT JSON) ${stmt.text}`, values: stmt.values });
  await client.query('ROLLBACK');
  const json = plan.rows[0]!['QUERY PLAN'] as { 'Execution Time': number }[];
  return { executionMs: json[0]!['Execution Time'], usesReadyIndex: JSON.stringify(json).includes('workflow_steps_ready_idx') };
}

/**
 * One batch: a fresh connection to each schema, claims alternating between them one by one
 * (so a busy moment of the machine hits both states alike), then one EXPLAIN ANALYZE each.
 */
async function measureBatch(url: string, schemas: { empty: string; loaded: string }, stmt: ClaimStatement, iterations: number): Promise<{ empty: ClaimBatch; loaded: ClaimBatch }> {
  const empty = await executorRoleClient(url, schemas.empty);
  const loaded = await executorRoleClient(url, schemas.loaded);
  try {
    const samples = { empty: [] as number[], loaded: [] as number[] };
    const warmup = 5;
    for (let i = 0; i < iterations + warmup; i++) {
      const e = await timeClaim(empty, stmt);
      const l = await timeClaim(loaded, stmt);
      if (i >= warmup) {
        samples.empty.push(e);
        samples.loaded.push(l);
      }
    }
    const batch = async (client: pg.Client, ms: number[]): Promise<ClaimBatch> => {
      const plan = await explainClaim(client, stmt);
      return { latencyMs: summarize(ms), explainExecutionMs: plan.executionMs, usesReadyIndex: plan.usesReadyIndex };
    };
    return { empty: await batch(empty, samples.empty), loaded: await batch(loaded, samples.loaded) };
  } finally {
    await empty.end();
    await loaded.end();
  }
}

/** A migrated schema with the ready steps and the finished workflows, and `finishedRows` done steps. */
async function prepareSchema(url: string, cleanup: Cleanup, label: string, finishedRows: number): Promise<{ schema: string; drop: () => Promise<void>; loadSeconds: number }> {
  const schema = newSchemaName(label);
  const drop = dropSchemaLater(cleanup, url, schema);
  await migrate({ url, schema });
  const client = await executorRoleClient(url, schema);
  try {
    await insertReadySteps(client);
    await insertFinishedWorkflows(client);
    const t0 = performance.now();
    if (finishedRows > 0) await loadFinishedSteps(client, finishedRows);
    await client.query('VACUUM ANALYZE workflows, workflow_steps');
    return { schema, drop, loadSeconds: (performance.now() - t0) / 1000 };
  } finally {
    await client.end();
  }
}

/** Two schemas, identical but for the finished rows, measured side by side. */
export async function runScale(opts: {
  url: string;
  cleanup: Cleanup;
  finishedRows: number;
  batches: number;
  iterations: number;
}): Promise<ScaleResult> {
  const claimLimit = await defaultClaimLimit();
  const stmt = await claimStatement('bench-claim', claimLimit, 90_000);
  const prepared: { drop: () => Promise<void> }[] = [];
  try {
    const emptySchema = await prepareSchema(opts.url, opts.cleanup, 'scale_empty', 0);
    prepared.push(emptySchema);
    const loadedSchema = await prepareSchema(opts.url, opts.cleanup, 'scale_loaded', opts.finishedRows);
    prepared.push(loadedSchema);
    const empty: ClaimBatch[] = [];
    const loaded: ClaimBatch[] = [];
    for (let b = 0; b < opts.batches; b++) {
      const r = await measureBatch(opts.url, { empty: emptySchema.schema, loaded: loadedSchema.schema }, stmt, opts.iterations);
      empty.push(r.empty);
      loaded.push(r.loaded);
    }
    return { finishedRows: opts.finishedRows, readyRows: READY_ROWS, claimLimit, statementSource: stmt.source, loadSeconds: loadedSchema.loadSeconds, empty, loaded };
  } finally {
    for (const p of prepared.reverse()) await p.drop();
  }
}

/** Loaded p50 ÷ empty p50, batch by batch. */
export function claimRatios(r: ScaleResult): number[] {
  return r.loaded.map((b, i) => b.latencyMs.p50 / r.empty[i]!.latencyMs.p50);
}
