/**
 * Statements on workflows: admission, the row lock, terminal states, deadlines.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ErrorData } from '../../errors.js';
import type { WorkflowRow } from '../tables.js';
import { storableError } from '../../storedError.js';
import { errorParam, jsonParam, payloadsParam, type EventsNotify, type Queryable } from './common.js';
import { FAIR_NEW_WORKFLOWS } from './lanes.js';

export type AdmittedWorkflow = Pick<
  WorkflowRow,
  'id' | 'name' | 'flow_version' | 'input' | 'created_by' | 'created_role' | 'step_count' | 'status' | 'error' | 'priority' | 'fork_step'
> & {
  /** The flow as JSON text (null for a refused start by name): the executor's compiler caches by it, parsing only a new one. */
  flow_text: string | null;
  /** Whether created_role may act as anyone (the database decides: superuser, executor or owner member). */
  role_trusted: boolean;
};

/** The `chosen(id)` CTE of admitting one given workflow (`$2`), if it is new, due and free. */
const ONLY_NEW_WORKFLOW = `chosen AS (
             SELECT id FROM workflows WHERE id = $2::bigint AND status = 'new' AND (start_at IS NULL OR start_at <= now())
              LIMIT $1 FOR UPDATE SKIP LOCKED)`;

/**
 * Moves up to `limit` new workflows to running, fairly across roles, then users (lanes.ts: each
 * role an equal share of the batch, the oldest of each first, the rest filled with the oldest),
 * roles taken in turn after `afterRole` when the batch is smaller than them;
 * skipping rows another executor holds and rows
 * whose `start_at` (`stepd run --at`) is still to come. A row
 * inserted with `flow` NULL starts a registered flow (sql/0009): the latest version of the flow
 * named `name`, or `flow_version`; the same statement copies that flow into the row and pins its
 * version. A row naming no registered flow (or version) is failed by the same statement with
 * `unknown_flow` (returned with status 'failed'), so it can never hold the batch back. Rows in
 * `skip` (ones the database refuses to change at all) are left alone; `only` takes that one row.
 *
 * The row of an admitted workflow's first step is counted in `step_count` in advance (returned
 * with it): the executor inserts it in the same transaction without writing the workflow row
 * again (TxWriter.precountFirstStep), and takes the count back if it inserts none.
 */
export async function admitNewWorkflowsResolvingRegisteredFlows(
  db: Queryable,
  limit: number,
  opts: { skip?: readonly string[]; only?: string; afterRole?: string } = {},
): Promise<AdmittedWorkflow[]> {
  const { rows } = await db.query<AdmittedWorkflow>({
    name: opts.only === undefined ? 'stepd_admit_new_workflows' : 'stepd_admit_new_workflow_only',
    // The pick reads what the resolution needs (one read of each row before the update).
    text: `WITH RECURSIVE ${opts.only === undefined ? FAIR_NEW_WORKFLOWS : ONLY_NEW_WORKFLOW},
           picked AS (SELECT id, name, flow IS NULL AS by_name, flow_version FROM workflows WHERE id IN (SELECT id FROM chosen)),
           resolved AS (
             SELECT w.id, f.flow AS registered, f.version,
                    CASE WHEN w.by_name AND f.flow IS NULL THEN jsonb_build_object(
                      'code', 'unknown_flow',
                      'message', CASE
                        WHEN latest.version IS NULL THEN
                          format('no flow named "%s" is registered (store one with: stepd flow put FILE --name %s)', left(w.name, 200), left(w.name, 200))
                        ELSE format('flow "%s" has no version %s (its latest version is %s)', left(w.name, 200), w.flow_version, latest.version)
                      END,
                      'details', jsonb_build_object('name', left(w.name, 200), 'version', w.flow_version, 'latest', latest.version))
                    END AS refusal
               FROM picked w
               LEFT JOIN LATERAL (
                 SELECT version, flow FROM flows
                  WHERE w.by_name AND name = w.name AND (w.flow_version IS NULL OR version = w.flow_version)
                  ORDER BY version DESC LIMIT 1) f ON true
               LEFT JOIN LATERAL (
                 SELECT max(version) AS version FROM flows WHERE w.by_name AND name = w.name) latest ON true)
           UPDATE workflows w SET updated_at = now(), started_at = now(),
                  status = CASE WHEN r.refusal IS NULL THEN 'running' ELSE 'failed' END,
                  step_count = CASE WHEN r.refusal IS NULL THEN w.step_count + 1 ELSE w.step_count END,
                  error = r.refusal,
                  completed_at = CASE WHEN r.refusal IS NULL THEN NULL ELSE now() END,
                  flow = coalesce(w.flow, r.registered),
                  flow_version = CASE WHEN w.flow IS NULL THEN coalesce(r.version, w.flow_version) ELSE w.flow_version END
             FROM resolved r WHERE w.id = r.id
        RETURNING w.id, w.name, w.flow::text AS flow_text, w.flow_version, w.input, w.created_by, w.created_role, w.step_count, w.status, w.error, w.priority, w.fork_step,
                  (w.created_role IS NULL OR stepd_role_is_trusted(w.created_role)) AS role_trusted`,
    values: opts.only === undefined ? [limit, opts.skip ?? [], opts.afterRole ?? ''] : [limit, opts.only],
  });
  return rows;
}

/** The ids the next admission would take (oldest first, `skip` left out), without locking them. */
export async function peekNewWorkflowIds(db: Queryable, limit: number, skip: readonly string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_peek_new_workflow_ids',
    text: `SELECT id FROM workflows WHERE status = 'new' AND (start_at IS NULL OR start_at <= now()) AND id <> ALL($2::bigint[])
            ORDER BY id LIMIT $1`,
    values: [limit, skip],
  });
  return rows.map((r) => r.id);
}

/** Takes back the first-step rows counted in advance at admission for workflows that got none (TxWriter). */
export async function uncountFirstSteps(db: Queryable, workflowIds: string[]): Promise<void> {
  await db.query({
    name: 'stepd_uncount_first_steps',
    text: `UPDATE workflows SET updated_at = now(), step_count = step_count - 1 WHERE id = ANY($1::bigint[]) AND step_count > 0`,
    values: [workflowIds],
  });
}

/** Records the user a client role's workflow runs as (its own name when it gave none). */
export async function setWorkflowUserIfRunning(db: Queryable, workflowId: string, user: string): Promise<void> {
  await db.query({
    name: 'stepd_set_workflow_user_if_running',
    text: `UPDATE workflows SET updated_at = now(), created_by = $2 WHERE id = $1 AND status = 'running'`,
    values: [workflowId, user],
  });
}

export async function setWorkflowDeadline(db: Queryable, workflowId: string, timeoutMs: number): Promise<void> {
  await db.query({
    name: 'stepd_set_workflow_deadline',
    text: `UPDATE workflows SET updated_at = now(), deadline_at = now() + $2 * interval '1 millisecond' WHERE id = $1`,
    values: [workflowId, timeoutMs],
  });
}

export type LockedWorkflow = Pick<WorkflowRow, 'id' | 'name' | 'input' | 'status' | 'created_by' | 'step_count'>;

/** Locks several workflow rows in id order (so concurrent batches never deadlock). */
export async function lockWorkflows(db: Queryable, workflowIds: string[]): Promise<LockedWorkflow[]> {
  const { rows } = await db.query<LockedWorkflow>({
    name: 'stepd_lock_workflows',
    text: `SELECT id, name, input, status, created_by, step_count FROM workflows
            WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`,
    values: [workflowIds],
  });
  return rows;
}

/**
 * Completes, in one statement, each running workflow none of whose steps is live: the ends of
 * their last chains. Returns the ids it completed.
 */
export async function completeWorkflowsIfNoLiveSteps(db: Queryable, ends: { workflowId: string; output: unknown }[]): Promise<string[]> {
  if (ends.length === 0) return [];
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_complete_workflows_if_no_live_steps',
    text: `UPDATE workflows w SET updated_at = now(), status = 'completed', output = u.output, completed_at = now()
             FROM unnest($1::bigint[], $2::jsonb[]) AS u(id, output)
            WHERE w.id = u.id AND w.status = 'running'
              AND NOT EXISTS (SELECT 1 FROM workflow_steps s
                               WHERE s.workflow_id = u.id AND s.status IN ('pending', 'ready', 'running'))
        RETURNING w.id`,
    values: [ends.map((e) => e.workflowId), ends.map((e) => jsonParam(e.output ?? null))],
  });
  return rows.map((r) => r.id);
}

/**
 * Ends a running workflow as completed (with output) or failed (with error) and cancels its
 * live steps, in one statement. Returns the ids of the steps that were running.
 */
export async function endWorkflowCancellingLiveSteps(
  db: Queryable,
  workflowId: string,
  end: { status: 'completed'; output: unknown } | { status: 'failed'; error: ErrorData },
): Promise<string[]> {
  const { rows } = await db.query<{ id: string | null }>({
    name: 'stepd_end_workflow_cancelling_live_steps',
    text: `WITH live AS (
             SELECT id, status FROM workflow_steps
              WHERE workflow_id = $1 AND status IN ('pending', 'ready', 'running') FOR UPDATE),
           cancelled AS (
             UPDATE workflow_steps s SET updated_at = now(), status = 'cancelled', completed_at = greatest(now(), s.started_at), lease_until = NULL
               FROM live WHERE s.id = live.id
             RETURNING s.id, live.status AS was),
           ended AS (
             UPDATE workflows SET updated_at = now(), status = $2,
                    output = CASE WHEN $2 = 'completed' THEN $3::jsonb END,
                    error = CASE WHEN $2 = 'failed' THEN $4::jsonb END,
                    completed_at = now(), started_at = coalesce(started_at, now())
              WHERE id = $1 AND status IN ('new', 'running')
             RETURNING id)
           SELECT id FROM cancelled WHERE was = 'running'`,
    values: [
      workflowId,
      end.status,
      end.status === 'completed' ? jsonParam(end.output ?? null) : null,
      end.status === 'failed' ? errorParam(end.error) : null,
    ],
  });
  return rows.map((r) => r.id).filter((id): id is string => id !== null);
}

/** How a workflow ends in endWorkflowsCancellingLiveSteps. */
export type WorkflowEnd = { workflowId: string } & ({ status: 'completed'; output: unknown } | { status: 'failed'; error: ErrorData });

/**
 * Ends several running workflows (each completed with its output or failed with its error) and
 * cancels their live steps, in one statement. `unapplied`: steps whose outcome this transaction
 * recorded but had not acted on yet when their workflow ended; they are cancelled too, as they
 * would have been had their outcome come a moment later. Returns the ids of the steps that were
 * running (their tools are aborted). With `notify`, the statement also NOTIFYs those events, in
 * order: the transaction's last statement, when nothing else is written after it.
 */
export async function endWorkflowsCancellingLiveSteps(
  db: Queryable,
  ends: WorkflowEnd[],
  unapplied: string[] = [],
  notify?: EventsNotify,
): Promise<string[]> {
  if (ends.length === 0) return [];
  const { rows } = await db.query<{ running: string[] }>({
    name: 'stepd_end_workflows_cancelling_live_steps',
    text: `WITH live AS (
             SELECT id, status FROM workflow_steps
              WHERE workflow_id = ANY($1::bigint[]) AND status IN ('pending', 'ready', 'running') FOR UPDATE),
           unapplied AS (
             SELECT id, status FROM workflow_steps
              WHERE id = ANY($3::bigint[]) AND workflow_id = ANY($1::bigint[]) AND status IN ('done', 'failed') FOR UPDATE),
           cancelled AS (
             UPDATE workflow_steps s SET updated_at = now(), status = 'cancelled', result = NULL, error = NULL,
                    completed_at = greatest(now(), s.started_at), lease_until = NULL
               FROM (SELECT * FROM live UNION ALL SELECT * FROM unapplied) c WHERE s.id = c.id
             RETURNING s.id, c.status AS was),
           ended AS (
             UPDATE workflows w SET updated_at = now(), status = u.status,
                    output = CASE WHEN u.status = 'completed' THEN u.output END,
                    error = CASE WHEN u.status = 'failed' THEN u.error END,
                    completed_at = now(), started_at = coalesce(w.started_at, now())
               FROM (SELECT (e.v ->> 'id')::bigint AS id, e.v ->> 'status' AS status, e.v -> 'output' AS output, e.v -> 'error' AS error
                       FROM jsonb_array_elements($2::jsonb) AS e(v)) u
              -- Not yet ended, written so that no index can serve it: each row is found by its id.
              -- (status IN ('new', 'running') would let a plan on stale statistics read every
              -- running workflow through the status index, in every batch.)
              WHERE w.id = u.id AND w.status <> ALL ('{completed,failed,cancelled}'::text[])
             RETURNING w.id),
           -- The transaction's events, in order, when this is its last statement (one round trip fewer).
           sent AS (SELECT count(*) AS n FROM (SELECT pg_notify($4, e.p::text) FROM json_array_elements($5::json) WITH ORDINALITY AS e(p, ord)
                                                WHERE $4 IS NOT NULL ORDER BY e.ord) x)
           SELECT ARRAY(SELECT id::text FROM cancelled WHERE was = 'running') AS running, (SELECT n FROM sent) AS notified`,
    // The ends as one JSON array (see insertSteps): a completed workflow's output is JSON null at least.
    values: [
      ends.map((e) => e.workflowId),
      JSON.stringify(ends.map((e) => (e.status === 'completed' ? { id: e.workflowId, status: e.status, output: e.output ?? null } : { id: e.workflowId, status: e.status, error: storableError(e.error) }))),
      unapplied,
      notify?.channel ?? null,
      payloadsParam(notify?.payloads),
    ],
  });
  return rows[0]?.running ?? [];
}


export type WorkflowDefinition = Pick<WorkflowRow, 'id' | 'name' | 'flow' | 'input' | 'created_by' | 'created_role' | 'priority'>;

export async function getWorkflowDefinitions(db: Queryable, ids: string[]): Promise<WorkflowDefinition[]> {
  const { rows } = await db.query<WorkflowDefinition>({
    name: 'stepd_get_workflow_definitions',
    text: `SELECT id, name, flow, input, created_by, created_role, priority FROM workflows WHERE id = ANY($1::bigint[])`,
    values: [ids],
  });
  return rows;
}

export async function failWorkflowIfActive(db: Queryable, workflowId: string, error: ErrorData): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_fail_workflow_if_active',
    // Never before created_at or started_at (a row written past the guard may hold a future
    // created_at): the timestamp CHECKs then cannot refuse the failure itself.
    text: `UPDATE workflows SET updated_at = now(), status = 'failed', error = $2::jsonb,
                  completed_at = greatest(now(), created_at, started_at),
                  started_at = coalesce(started_at, greatest(now(), created_at))
            WHERE id = $1 AND status IN ('new', 'running')`,
    values: [workflowId, errorParam(error)],
  });
  return rowCount === 1;
}

export async function findOverdueWorkflows(db: Queryable, limit: number): Promise<{ id: string }[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_find_overdue_workflows',
    // A workflow waiting for its redrive (redrive.ts) gets a fresh deadline then; its old one does not count.
    text: `SELECT id FROM workflows WHERE status = 'running' AND deadline_at < now() AND redrive_requested_at IS NULL
            ORDER BY deadline_at LIMIT $1`,
    values: [limit],
  });
  return rows;
}


/**
 * Of these workflows, the ones whose row says `cancelled`: a wake-up that claims a cancellation
 * is a hint (any role may NOTIFY), so the executor aborts running tools only for the ids this
 * returns. One statement for a whole batch of hints, however many notifications named them.
 */
export async function findWorkflowIdsIfCancelled(db: Queryable, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_find_workflow_ids_if_cancelled',
    text: `SELECT id FROM workflows WHERE id = ANY($1::bigint[]) AND status = 'cancelled'`,
    values: [ids],
  });
  return rows.map((r) => r.id);
}
