/**
 * Creating step rows and reading results for templates.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ErrorData } from '../../errors.js';
import type { StepRow, StepStatus } from '../tables.js';
import { storableError } from '../../storedError.js';
import { payloadsParam, type EventsNotify, type Queryable } from './common.js';

export interface NewStep {
  workflowId: string;
  name: string;
  tool: string | null;
  args: unknown;
  /** `running`: claimed by `executorId` in the same transaction that creates it. */
  status: Extract<StepStatus, 'pending' | 'ready' | 'running' | 'done' | 'failed'>;
  attempt: number;
  /** Claimable after this many ms (ready steps). */
  readyInMs?: number;
  /** Or at this instant (timers with `until`). */
  readyAt?: Date;
  fanoutId: string | null;
  itemIndex: number | null;
  /** Gates: expire after this many ms. */
  expiresInMs?: number;
  result?: unknown;
  error?: ErrorData;
  /** Running steps: the owner and the lease. */
  executorId?: string;
  leaseMs?: number;
  /** A fork row created with its fan-out in progress. */
  fanoutOpen?: boolean;
  /** A retry: the id of the step's first attempt. */
  firstAttemptId?: string;
  /** Its workflow's priority (claims take higher first; sql/0028). */
  priority?: number;
  /** Under a key or a rate (capacityFields.ts): left to the capacity claim. A retry copies its first attempt's. */
  capacity?: StepCapacity;
}

/** A step's keys and rates (sql/0028): `gated` rows are claimed only through capacity_verdicts. */
export interface StepCapacity {
  concurrencyKey?: string;
  concurrencyLimit?: number;
  /** Token buckets, each 'COUNT|PERIOD_MS|BURST|NAME'. */
  rateKeys?: string[];
}

/**
 * Events to NOTIFY in the same statement that inserts steps (saving a round trip): `payloads` in
 * order, then, with `startedSchema`, a `step.started` event for each step inserted running.
 */
export interface StepNotify extends EventsNotify {
  startedSchema: string | null;
}

/**
 * Inserts step rows (of any number of workflows) in one statement and counts them against
 * each workflow's budget (`step_count`), less `counted`: rows per workflow already counted (a
 * first step, counted by its admission). Returns the new ids in input order: rows are inserted in ordinal
 * order, so their identity values ascend with it.
 */
export async function insertSteps(db: Queryable, steps: NewStep[], notify?: StepNotify, counted?: Map<string, number>): Promise<string[]> {
  if (steps.length === 0) return [];
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_insert_steps',
    // The rows travel as one JSON array (the driver would escape every element of 17 arrays in
    // JavaScript); `args`, `result` and `error` are read with ->, so a JSON null stays 'null'
    // and an absent key is SQL NULL.
    text: `WITH ins AS (
             INSERT INTO workflow_steps (workflow_id, name, tool, args, status, attempt, ready_at, fanout_id, item_index,
                                         expires_at, result, error, started_at, completed_at, executor_id, lease_until,
                                         fanout_open, first_attempt_id, priority, gated, concurrency_key, concurrency_limit, rate_keys)
             SELECT u.workflow_id, u.name, u.tool, e.v -> 'args', u.status, u.attempt,
                    CASE WHEN u.status IN ('ready', 'running')
                         THEN coalesce(u.ready_at, now() + coalesce(u.ready_in, 0) * interval '1 millisecond') END,
                    u.fanout_id, u.item_index,
                    CASE WHEN u.expires_in IS NOT NULL THEN now() + u.expires_in * interval '1 millisecond' END,
                    e.v -> 'result', e.v -> 'error',
                    CASE WHEN u.status IN ('done', 'failed', 'running') THEN now() END,
                    CASE WHEN u.status IN ('done', 'failed') THEN now() END,
                    u.executor_id,
                    CASE WHEN u.status = 'running' THEN now() + u.lease_ms * interval '1 millisecond' END,
                    coalesce(u.fanout_open, false), u.first_attempt_id, coalesce(u.priority, 0),
                    coalesce(u.gated, f.gated, false), coalesce(u.concurrency_key, f.concurrency_key),
                    coalesce(u.concurrency_limit, f.concurrency_limit), coalesce(u.rate_keys, f.rate_keys)
               FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(v, ord)
               CROSS JOIN LATERAL jsonb_to_record(e.v)
                    AS u(workflow_id bigint, name text, tool text, status text, attempt int, ready_in bigint, ready_at timestamptz,
                         fanout_id bigint, item_index int, expires_in bigint, executor_id text, lease_ms bigint,
                         fanout_open boolean, first_attempt_id bigint, priority int, gated boolean, concurrency_key text,
                         concurrency_limit int, rate_keys text[])
               -- A retry keeps its first attempt's keys and rates (sql/0028); a first attempt reads nothing here.
               -- OFFSET 0 keeps the subquery a per-row probe behind a one-time filter: pulled up, the
               -- planner may hash every step row of the table to join a first attempt to nothing.
               LEFT JOIN LATERAL (SELECT f.gated, f.concurrency_key, f.concurrency_limit, f.rate_keys FROM workflow_steps f
                                   WHERE u.first_attempt_id IS NOT NULL AND u.gated IS NULL AND f.id = u.first_attempt_id
                                  OFFSET 0) f ON true
              ORDER BY e.ord
             RETURNING id, workflow_id, name, attempt, item_index, status),
           counted AS (
             UPDATE workflows w SET updated_at = now(), step_count = w.step_count + c.n
               FROM (SELECT workflow_id, count(*) - coalesce(($5::jsonb ->> workflow_id::text)::int, 0) AS n
                       FROM ins GROUP BY workflow_id) c
              WHERE w.id = c.workflow_id AND c.n > 0),
           events AS (
             SELECT 1 AS grp, e.ord AS ord, e.payload::text FROM json_array_elements($3::json) WITH ORDINALITY AS e(payload, ord)
             UNION ALL
             SELECT 2, i.id, CASE WHEN i.item_index IS NULL
                      THEN json_build_object('type', 'step.started', 'schema', $4::text, 'workflowId', i.workflow_id::text,
                             'stepId', i.id::text, 'step', left(i.name, 200), 'attempt', i.attempt, 'at', now())
                      ELSE json_build_object('type', 'step.started', 'schema', $4::text, 'workflowId', i.workflow_id::text,
                             'stepId', i.id::text, 'step', left(i.name, 200), 'attempt', i.attempt, 'itemIndex', i.item_index,
                             'at', now()) END::text
               FROM ins i WHERE i.status = 'running' AND $4::text IS NOT NULL),
           sent AS (SELECT count(*) AS n FROM (SELECT pg_notify($2, payload) FROM events ORDER BY grp, ord) x)
           SELECT id, (SELECT n FROM sent) AS notified FROM ins ORDER BY id`,
    values: [
      JSON.stringify(steps.map(stepRecord)),
      notify?.channel ?? 'stepd_events',
      payloadsParam(notify?.payloads),
      notify?.startedSchema ?? null,
      JSON.stringify(Object.fromEntries(counted ?? [])),
    ],
  });
  return rows.map((r) => r.id);
}

/**
 * A new row as insertSteps sends it. JSON.stringify leaves out undefined keys, which read as SQL
 * NULL; so do null and false where they mean the same (fewer bytes per row). `args`, `result`
 * and `error` keep a JSON null: there it is a value.
 */
function stepRecord(s: NewStep): Record<string, unknown> {
  return {
    workflow_id: s.workflowId,
    name: s.name,
    tool: s.tool ?? undefined,
    args: s.args,
    status: s.status,
    attempt: s.attempt,
    ready_in: s.readyInMs === undefined ? undefined : Math.max(0, Math.round(s.readyInMs)),
    ready_at: s.readyAt,
    fanout_id: s.fanoutId ?? undefined,
    item_index: s.itemIndex ?? undefined,
    expires_in: s.expiresInMs === undefined ? undefined : Math.round(s.expiresInMs),
    result: s.result,
    error: s.error && storableError(s.error),
    executor_id: s.executorId,
    lease_ms: s.leaseMs === undefined ? undefined : Math.round(s.leaseMs),
    fanout_open: s.fanoutOpen === true ? true : undefined,
    first_attempt_id: s.firstAttemptId,
    priority: s.priority ? s.priority : undefined,
    ...(s.capacity ? { gated: true, concurrency_key: s.capacity.concurrencyKey, concurrency_limit: s.capacity.concurrencyLimit, rate_keys: s.capacity.rateKeys } : {}),
  };
}

/** The latest done attempt of each named step: what `{{steps.NAME.result}}` reads. */
export async function getLatestDoneResults(db: Queryable, workflowId: string, names: string[]): Promise<Map<string, unknown>> {
  const out = new Map<string, unknown>();
  if (names.length === 0) return out;
  const { rows } = await db.query<{ name: string; result: unknown }>({
    name: 'stepd_get_latest_done_results',
    text: `SELECT DISTINCT ON (name) name, result FROM workflow_steps
            WHERE workflow_id = $1 AND name = ANY($2::text[]) AND status = 'done'
            ORDER BY name, id DESC`,
    values: [workflowId, names],
  });
  for (const r of rows) out.set(r.name, r.result);
  return out;
}

/**
 * The row created just before `beforeId` in the same chain (same fan-out instance and item):
 * for an onError step, the failed attempt that routed there.
 */
export async function getPrecedingRowInChain(
  db: Queryable,
  v: { workflowId: string; fanoutId: string | null; itemIndex: number | null; beforeId: string },
): Promise<Pick<StepRow, 'id' | 'name' | 'status' | 'attempt' | 'error'> | undefined> {
  const { rows } = await db.query<Pick<StepRow, 'id' | 'name' | 'status' | 'attempt' | 'error'>>({
    name: 'stepd_get_preceding_row_in_chain',
    text: `SELECT id, name, status, attempt, error FROM workflow_steps
            WHERE workflow_id = $1 AND fanout_id IS NOT DISTINCT FROM $2 AND item_index IS NOT DISTINCT FROM $3 AND id < $4
            ORDER BY id DESC LIMIT 1`,
    values: [v.workflowId, v.fanoutId, v.itemIndex, v.beforeId],
  });
  return rows[0];
}

/**
 * How many attempts of a step (the chain of retries that started with `firstAttemptId`) before
 * `beforeId` were lost: failed with code `lost` (their executor or worker died).
 */
export async function countLostAttemptsBefore(db: Queryable, v: { workflowId: string; firstAttemptId: string; beforeId: string }): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'stepd_count_lost_attempts_before',
    text: `SELECT count(*)::int AS n FROM workflow_steps
            WHERE workflow_id = $1 AND (id = $2 OR first_attempt_id = $2) AND id < $3
              AND status = 'failed' AND error ->> 'code' = 'lost'`,
    values: [v.workflowId, v.firstAttemptId, v.beforeId],
  });
  return rows[0]?.n ?? 0;
}

/** A forEach item: the fork row that created it and its index there. */
export interface ItemPosition {
  forkId: string;
  index: number;
}

/**
 * Like getLatestDoneResults, for a reader inside forEach items (`items`, innermost first):
 * each step's latest done row within the innermost of those items that has one (its subtree,
 * nested fan-outs included), else the latest done row anywhere. So a step in item 3 reads item
 * 3's rows, not the row of whichever item finished last.
 */
export async function getLatestDoneResultsInItems(
  db: Queryable,
  workflowId: string,
  names: string[],
  items: ItemPosition[],
): Promise<Map<string, unknown>> {
  const out = new Map<string, unknown>();
  if (names.length === 0) return out;
  const { rows } = await db.query<{ name: string; result: unknown }>({
    name: 'stepd_get_latest_done_results_in_items',
    text: `WITH RECURSIVE item_rows AS (
             SELECT s.id, p.k FROM unnest($3::bigint[], $4::int[]) WITH ORDINALITY AS p(fanout_id, item_index, k)
               JOIN workflow_steps s ON s.fanout_id = p.fanout_id AND s.item_index = p.item_index
             UNION ALL
             SELECT c.id, item_rows.k FROM workflow_steps c JOIN item_rows ON c.fanout_id = item_rows.id),
           ranked AS (SELECT id, min(k) AS k FROM item_rows GROUP BY id)
           SELECT DISTINCT ON (s.name) s.name, s.result
             FROM workflow_steps s LEFT JOIN ranked r ON r.id = s.id
            WHERE s.workflow_id = $1 AND s.name = ANY($2::text[]) AND s.status = 'done'
            ORDER BY s.name, r.k NULLS LAST, s.id DESC`,
    values: [workflowId, names, items.map((i) => i.forkId), items.map((i) => i.index)],
  });
  for (const r of rows) out.set(r.name, r.result);
  return out;
}
