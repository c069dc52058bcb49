/**
 * Every runtime statement of the executor, each a named function whose name says its guard.
 * Connections have search_path set to the stepd schema (see connect.ts), so statements use
 * unqualified table names and can be prepared once per connection (`name`).
 * Values are always parameters; nothing here builds SQL from input.
 */
import type { ErrorData } from '../errors.js';
import type { StepRow, StepStatus, WorkflowRow } from './tables.js';

export interface Queryable {
  query<R = any>(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** JSON for a jsonb parameter: undefined → SQL NULL, anything else (even null) → its JSON text. */
export function jsonParam(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}

// ---------------------------------------------------------------- workflows

export type AdmittedWorkflow = Pick<WorkflowRow, 'id' | 'name' | 'flow' | 'input' | 'created_by' | 'step_count'>;

/** Moves up to `limit` new workflows to running, skipping rows another executor holds. */
export async function admitNewWorkflows(db: Queryable, limit: number): Promise<AdmittedWorkflow[]> {
  const { rows } = await db.query<AdmittedWorkflow>({
    name: 'stepd_admit_new_workflows',
    text: `UPDATE workflows SET status = 'running', started_at = now()
            WHERE id IN (SELECT id FROM workflows WHERE status = 'new' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING id, name, flow, input, created_by, step_count`,
    values: [limit],
  });
  return rows;
}

export async function setWorkflowDeadline(db: Queryable, workflowId: string, timeoutMs: number): Promise<void> {
  await db.query({
    name: 'stepd_set_workflow_deadline',
    text: `UPDATE workflows SET deadline_at = now() + $2 * interval '1 millisecond' WHERE id = $1`,
    values: [workflowId, timeoutMs],
  });
}

export type LockedWorkflow = Pick<WorkflowRow, 'id' | 'name' | 'input' | 'status' | 'created_by' | 'step_count'>;

/** Locks the workflow row: every transition of one workflow runs under this lock. */
export async function lockWorkflow(db: Queryable, workflowId: string): Promise<LockedWorkflow | undefined> {
  const { rows } = await db.query<LockedWorkflow>({
    name: 'stepd_lock_workflow',
    text: `SELECT id, name, input, status, created_by, step_count FROM workflows WHERE id = $1 FOR UPDATE`,
    values: [workflowId],
  });
  return rows[0];
}

export type WorkflowDefinition = Pick<WorkflowRow, 'id' | 'name' | 'flow' | 'input' | 'created_by'>;

export async function getWorkflowDefinitions(db: Queryable, ids: string[]): Promise<WorkflowDefinition[]> {
  const { rows } = await db.query<WorkflowDefinition>({
    name: 'stepd_get_workflow_definitions',
    text: `SELECT id, name, flow, input, created_by FROM workflows WHERE id = ANY($1::bigint[])`,
    values: [ids],
  });
  return rows;
}

export async function completeWorkflowIfRunning(db: Queryable, workflowId: string, output: unknown): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_complete_workflow_if_running',
    text: `UPDATE workflows SET status = 'completed', output = $2::jsonb, completed_at = now()
            WHERE id = $1 AND status = 'running'`,
    values: [workflowId, jsonParam(output ?? null)],
  });
  return rowCount === 1;
}

export async function failWorkflowIfActive(db: Queryable, workflowId: string, error: ErrorData): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_fail_workflow_if_active',
    text: `UPDATE workflows SET status = 'failed', error = $2::jsonb, completed_at = now(),
                  started_at = coalesce(started_at, now())
            WHERE id = $1 AND status IN ('new', 'running')`,
    values: [workflowId, jsonParam(error)],
  });
  return rowCount === 1;
}

export async function findOverdueWorkflows(db: Queryable, limit: number): Promise<{ id: string }[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_find_overdue_workflows',
    text: `SELECT id FROM workflows WHERE status = 'running' AND deadline_at < now() ORDER BY deadline_at LIMIT $1`,
    values: [limit],
  });
  return rows;
}

// ---------------------------------------------------------------- steps: claim and finish

export type ClaimedStep = StepRow & { created_by: string | null };

/**
 * The hot path: claims up to `limit` ready steps in one statement, setting owner and lease.
 * Steps of tools (LIKE patterns) or users at their concurrency limit are skipped, so they stay
 * ready without blocking the steps behind them.
 */
export async function claimReadySteps(
  db: Queryable,
  opts: { executorId: string; limit: number; leaseMs: number; skipToolsLike?: string[]; skipUsers?: string[] },
): Promise<ClaimedStep[]> {
  const { rows } = await db.query<ClaimedStep>({
    name: 'stepd_claim_ready_steps',
    text: `WITH claimed AS (
             UPDATE workflow_steps
                SET status = 'running', started_at = now(), executor_id = $1,
                    lease_until = now() + $3 * interval '1 millisecond'
              WHERE id IN (SELECT id FROM workflow_steps
                            WHERE status = 'ready' AND ready_at <= now()
                              AND (cardinality($4::text[]) = 0 OR tool IS NULL OR NOT (tool LIKE ANY($4::text[])))
                              AND (cardinality($5::text[]) = 0 OR NOT EXISTS (
                                    SELECT 1 FROM workflows w
                                     WHERE w.id = workflow_steps.workflow_id AND w.created_by = ANY($5::text[])))
                            ORDER BY ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
          RETURNING *)
           SELECT claimed.*, w.created_by FROM claimed JOIN workflows w ON w.id = claimed.workflow_id`,
    values: [opts.executorId, opts.limit, opts.leaseMs, opts.skipToolsLike ?? [], opts.skipUsers ?? []],
  });
  return rows;
}

export async function extendLeasesIfRunning(
  db: Queryable,
  executorId: string,
  leases: { id: string; leaseMs: number }[],
): Promise<void> {
  if (leases.length === 0) return;
  await db.query({
    name: 'stepd_extend_leases_if_running',
    text: `UPDATE workflow_steps s SET lease_until = now() + u.ms * interval '1 millisecond'
             FROM unnest($2::bigint[], $3::bigint[]) AS u(id, ms)
            WHERE s.id = u.id AND s.status = 'running' AND s.executor_id = $1`,
    values: [executorId, leases.map((l) => l.id), leases.map((l) => l.leaseMs)],
  });
}

export interface FinishedStep {
  id: string;
  workflow_id: string;
  name: string;
  attempt: number;
  fanout_id: string | null;
  item_index: number | null;
  args: unknown;
  result: unknown;
}

const FINISH_SET = `status = $2, result = CASE WHEN $2 = 'done' THEN $3::jsonb ELSE result END,
                    error = $4::jsonb, args = coalesce($5::jsonb, args), completed_at = now(),
                    started_at = coalesce(started_at, now()), lease_until = NULL`;
const FINISH_RETURNING = `RETURNING id, workflow_id, name, attempt, fanout_id, item_index, args, result`;

export interface FinishValues {
  id: string;
  status: Extract<StepStatus, 'done' | 'failed'>;
  result?: unknown;
  error?: ErrorData;
  args?: unknown;
}

function finishValues(v: FinishValues): unknown[] {
  return [v.id, v.status, jsonParam(v.result ?? null), jsonParam(v.error), jsonParam(v.args)];
}

/** Finishes a step this executor is running; a late or duplicate result finds no row. */
export async function finishStepIfRunning(db: Queryable, executorId: string, v: FinishValues): Promise<FinishedStep | undefined> {
  const { rows } = await db.query<FinishedStep>({
    name: 'stepd_finish_step_if_running',
    text: `UPDATE workflow_steps SET ${FINISH_SET}
            WHERE id = $1 AND status = 'running' AND executor_id = $6 ${FINISH_RETURNING}`,
    values: [...finishValues(v), executorId],
  });
  return rows[0];
}

/** The watchdog's finish: only a running step whose lease has run out. */
export async function finishStepIfLeaseExpired(db: Queryable, v: FinishValues): Promise<FinishedStep | undefined> {
  const { rows } = await db.query<FinishedStep>({
    name: 'stepd_finish_step_if_lease_expired',
    text: `UPDATE workflow_steps SET ${FINISH_SET}
            WHERE id = $1 AND status = 'running' AND lease_until < now() ${FINISH_RETURNING}`,
    values: finishValues(v),
  });
  return rows[0];
}

/** A gate's deadline passed: only a gate still pending past its expiry. */
export async function finishGateIfExpired(db: Queryable, v: FinishValues): Promise<FinishedStep | undefined> {
  const { rows } = await db.query<FinishedStep>({
    name: 'stepd_finish_gate_if_expired',
    text: `UPDATE workflow_steps SET ${FINISH_SET}
            WHERE id = $1 AND status = 'pending' AND expires_at < now() ${FINISH_RETURNING}`,
    values: finishValues(v),
  });
  return rows[0];
}

/** Graceful shutdown: hands running steps back without spending an attempt. */
export async function releaseStepsIfRunning(db: Queryable, executorId: string, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const { rowCount } = await db.query({
    name: 'stepd_release_steps_if_running',
    text: `UPDATE workflow_steps SET status = 'ready', ready_at = now(), started_at = NULL, lease_until = NULL, executor_id = NULL
            WHERE id = ANY($2::bigint[]) AND status = 'running' AND executor_id = $1`,
    values: [executorId, ids],
  });
  return rowCount ?? 0;
}

/** Of the given steps, those no longer running under this executor (cancelled, rescued). */
export async function findStepsNoLongerRunning(db: Queryable, executorId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_find_steps_no_longer_running',
    text: `SELECT id FROM workflow_steps WHERE id = ANY($2::bigint[]) AND NOT (status = 'running' AND executor_id = $1)`,
    values: [executorId, ids],
  });
  return rows.map((r) => r.id);
}

export async function findRunningStepsOfExecutor(db: Queryable, executorId: string): Promise<{ id: string; workflow_id: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string }>({
    name: 'stepd_find_running_steps_of_executor',
    text: `SELECT id, workflow_id FROM workflow_steps WHERE status = 'running' AND executor_id = $1`,
    values: [executorId],
  });
  return rows;
}

export async function findExpiredLeases(db: Queryable, limit: number): Promise<{ id: string; workflow_id: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string }>({
    name: 'stepd_find_expired_leases',
    text: `SELECT id, workflow_id FROM workflow_steps WHERE status = 'running' AND lease_until < now() ORDER BY lease_until LIMIT $1`,
    values: [limit],
  });
  return rows;
}

export async function findExpiredGates(db: Queryable, limit: number): Promise<{ id: string; workflow_id: string; name: string }[]> {
  const { rows } = await db.query<{ id: string; workflow_id: string; name: string }>({
    name: 'stepd_find_expired_gates',
    text: `SELECT id, workflow_id, name FROM workflow_steps
            WHERE status = 'pending' AND expires_at < now() ORDER BY expires_at LIMIT $1`,
    values: [limit],
  });
  return rows;
}

// ---------------------------------------------------------------- steps: creation and lookups

export interface NewStep {
  name: string;
  tool: string | null;
  args: unknown;
  status: Extract<StepStatus, 'pending' | 'ready' | 'done' | 'failed'>;
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
}

/** Inserts steps of one workflow in one statement and counts them against its budget. */
export async function insertSteps(db: Queryable, workflowId: string, steps: NewStep[]): Promise<string[]> {
  if (steps.length === 0) return [];
  const col = <T>(f: (s: NewStep) => T) => steps.map(f);
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_insert_steps',
    text: `WITH ins AS (
             INSERT INTO workflow_steps (workflow_id, name, tool, args, status, attempt, ready_at, fanout_id, item_index,
                                         expires_at, result, error, started_at, completed_at)
             SELECT $1, u.name, u.tool, u.args, u.status, u.attempt,
                    CASE WHEN u.status = 'ready' THEN coalesce(u.ready_at, now() + coalesce(u.ready_in, 0) * interval '1 millisecond') END,
                    u.fanout_id, u.item_index,
                    CASE WHEN u.expires_in IS NOT NULL THEN now() + u.expires_in * interval '1 millisecond' END,
                    u.result, u.error,
                    CASE WHEN u.status IN ('done', 'failed') THEN now() END,
                    CASE WHEN u.status IN ('done', 'failed') THEN now() END
               FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::text[], $6::int[], $7::bigint[], $8::timestamptz[],
                           $9::bigint[], $10::int[], $11::bigint[], $12::jsonb[], $13::jsonb[])
                    AS u(name, tool, args, status, attempt, ready_in, ready_at, fanout_id, item_index, expires_in, result, error)
             RETURNING id),
           counted AS (UPDATE workflows SET step_count = step_count + (SELECT count(*) FROM ins) WHERE id = $1)
           SELECT id FROM ins ORDER BY id`,
    values: [
      workflowId,
      col((s) => s.name),
      col((s) => s.tool),
      col((s) => jsonParam(s.args)),
      col((s) => s.status),
      col((s) => s.attempt),
      col((s) => (s.readyInMs === undefined ? null : Math.max(0, Math.round(s.readyInMs)))),
      col((s) => s.readyAt ?? null),
      col((s) => s.fanoutId),
      col((s) => s.itemIndex),
      col((s) => (s.expiresInMs === undefined ? null : Math.round(s.expiresInMs))),
      col((s) => jsonParam(s.result)),
      col((s) => jsonParam(s.error)),
    ],
  });
  return rows.map((r) => r.id);
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

export type ForkRow = Pick<StepRow, 'id' | 'name' | 'args' | 'result' | 'fanout_id' | 'item_index'>;

export async function getForkRow(db: Queryable, stepId: string): Promise<ForkRow | undefined> {
  const { rows } = await db.query<ForkRow>({
    name: 'stepd_get_fork_row',
    text: `SELECT id, name, args, result, fanout_id, item_index FROM workflow_steps WHERE id = $1`,
    values: [stepId],
  });
  return rows[0];
}

/**
 * How many steps of a fan-out instance are live, and how many items have been started.
 * `live` counts the whole subtree: a nested fork row is `done` as soon as it fans out, so the
 * rows of its own branches (and theirs, at any depth) must hold the enclosing join back too.
 */
export async function getFanoutProgress(db: Queryable, forkId: string): Promise<{ live: number; started: number }> {
  const { rows } = await db.query<{ live: number; started: number }>({
    name: 'stepd_get_fanout_progress',
    text: `WITH RECURSIVE tree AS (
             SELECT id, status, item_index, true AS direct FROM workflow_steps WHERE fanout_id = $1
             UNION ALL
             SELECT s.id, s.status, s.item_index, false FROM workflow_steps s JOIN tree ON s.fanout_id = tree.id)
           SELECT count(*) FILTER (WHERE status IN ('pending', 'ready', 'running'))::int AS live,
                  coalesce(max(item_index) FILTER (WHERE direct) + 1, 0)::int AS started
             FROM tree`,
    values: [forkId],
  });
  return rows[0] ?? { live: 0, started: 0 };
}

export interface FanoutOutcome {
  id: string;
  name: string;
  item_index: number;
  status: StepStatus;
  result: unknown;
  error: ErrorData | null;
}

/** The last row of each branch (item) of a fan-out instance, in item order. */
export async function getFanoutOutcomes(db: Queryable, forkId: string): Promise<FanoutOutcome[]> {
  const { rows } = await db.query<FanoutOutcome>({
    name: 'stepd_get_fanout_outcomes',
    text: `SELECT DISTINCT ON (item_index) id, name, item_index, status, result, error FROM workflow_steps
            WHERE fanout_id = $1 ORDER BY item_index, id DESC`,
    values: [forkId],
  });
  return rows;
}

export async function countLiveSteps(db: Queryable, workflowId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'stepd_count_live_steps',
    text: `SELECT count(*)::int AS n FROM workflow_steps WHERE workflow_id = $1 AND status IN ('pending', 'ready', 'running')`,
    values: [workflowId],
  });
  return rows[0]?.n ?? 0;
}

/** Cancels every live step of a workflow; returns the ids of those that were running. */
export async function cancelLiveSteps(db: Queryable, workflowId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_cancel_live_steps',
    text: `WITH live AS (
             SELECT id, status FROM workflow_steps
              WHERE workflow_id = $1 AND status IN ('pending', 'ready', 'running') FOR UPDATE)
           UPDATE workflow_steps s SET status = 'cancelled', completed_at = now(), lease_until = NULL
             FROM live WHERE s.id = live.id
           RETURNING s.id, live.status AS was`,
    values: [workflowId],
  });
  return (rows as unknown as { id: string; was: string }[]).filter((r) => r.was === 'running').map((r) => r.id);
}

/**
 * Cancels the live steps below a fork row (its branches and theirs, at any depth); returns the
 * ids of those that were running.
 */
export async function cancelLiveStepsInFanout(db: Queryable, forkId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string; was: string }>({
    name: 'stepd_cancel_live_steps_in_fanout',
    text: `WITH RECURSIVE tree AS (
             SELECT id, status FROM workflow_steps WHERE fanout_id = $1
             UNION ALL
             SELECT s.id, s.status FROM workflow_steps s JOIN tree ON s.fanout_id = tree.id),
           live AS (
             SELECT s.id, s.status FROM workflow_steps s JOIN tree ON tree.id = s.id
              WHERE s.status IN ('pending', 'ready', 'running') FOR UPDATE OF s)
           UPDATE workflow_steps s SET status = 'cancelled', completed_at = now(), lease_until = NULL
             FROM live WHERE s.id = live.id
           RETURNING s.id, live.status AS was`,
    values: [forkId],
  });
  return rows.filter((r) => r.was === 'running').map((r) => r.id);
}

/** A failFast fan-out failed: its fork row (done when it fanned out) records the branch's error. */
export async function failForkRowIfDone(db: Queryable, forkId: string, error: ErrorData): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_fail_fork_row_if_done',
    text: `UPDATE workflow_steps SET status = 'failed', error = $2::jsonb WHERE id = $1 AND status = 'done'`,
    values: [forkId, jsonParam(error)],
  });
  return rowCount === 1;
}

// ---------------------------------------------------------------- events and locks

/** NOTIFYs are delivered when the transaction commits, so events never announce a rollback. */
export async function notifyEvents(db: Queryable, channel: string, payloads: string[]): Promise<void> {
  if (payloads.length === 0) return;
  await db.query({
    name: 'stepd_notify_events',
    text: `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`,
    values: [channel, payloads],
  });
}

export async function tryAdvisoryLock(db: Queryable, key: string): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>({
    text: `SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok`,
    values: [key],
  });
  return rows[0]?.ok === true;
}
