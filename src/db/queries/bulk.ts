/**
 * Bulk cancel and retry by filter (docs/operations.md, "Bulk operations"): each one statement of
 * the SQL contract — `UPDATE workflows SET status = 'cancelled'` over the new and running ones,
 * `SET status = 'running'` (a redrive) over the failed ones — on the rows a filter picks, locked
 * in id order first (as the executor locks them, so the two never deadlock). Only top-level
 * workflows (a child goes with its parent) and only those the session's role may act on: its
 * own (created_role is it, or a role it is a member of) unless it is trusted, as the redrive
 * guard and delete_workflows decide. The dry run reads the same rows without writing.
 * Not re-exported by src/db/queries.ts.
 */
import type { WorkflowStatus } from '../tables.js';
import type { Queryable } from './common.js';

export interface BulkFilter {
  name?: string;
  /** A status the action applies to (cancel: new or running; retry: failed). */
  status?: WorkflowStatus;
  /** created_by. */
  user?: string;
  /** Created at or after. */
  since?: Date;
  /** Only these workflows (the dashboard's multi-select). */
  ids?: string[];
  limit: number;
}

export interface BulkRow {
  id: string;
  name: string;
  status: WorkflowStatus;
  created_by: string | null;
  created_at: Date;
}

const PICK = (statuses: string) => `SELECT w.id FROM workflows w
   WHERE w.parent_id IS NULL AND w.status IN (${statuses}) AND ($1::text IS NULL OR w.status = $1)
     AND ($2::text IS NULL OR w.name = $2) AND ($3::text IS NULL OR w.created_by = $3)
     AND ($4::timestamptz IS NULL OR w.created_at >= $4) AND ($6::bigint[] IS NULL OR w.id = ANY($6::bigint[]))
     AND (stepd_role_is_trusted(session_user::text)
          OR coalesce(pg_has_role(session_user, to_regrole(quote_ident(w.created_role))::oid, 'MEMBER'), false))`;

const CANCELLABLE = PICK(`'new', 'running'`);
// A failed workflow that was never admitted cannot be redriven (the guard refuses it): left out.
const REDRIVABLE = `${PICK(`'failed'`)} AND w.flow IS NOT NULL`;

const values = (f: BulkFilter) => [f.status ?? null, f.name ?? null, f.user ?? null, f.since ?? null, f.limit, f.ids ?? null];
const COLUMNS = 'w.id, w.name, w.status, w.created_by, w.created_at';

/** Cancels every workflow the filter picks (at most `limit`, oldest first); returns them as cancelled. */
export async function cancelWorkflowsByFilter(db: Queryable, f: BulkFilter): Promise<BulkRow[]> {
  const { rows } = await db.query<BulkRow>({
    name: 'stepd_cancel_workflows_by_filter',
    text: `WITH picked AS (${CANCELLABLE} ORDER BY w.id LIMIT $5 FOR UPDATE OF w)
           UPDATE workflows w SET status = 'cancelled' FROM picked WHERE w.id = picked.id AND w.status IN ('new', 'running')
           RETURNING ${COLUMNS}`,
    values: values(f),
  });
  return rows;
}

/** Redrives every failed workflow the filter picks (at most `limit`, oldest first). */
export async function redriveWorkflowsByFilter(db: Queryable, f: BulkFilter): Promise<BulkRow[]> {
  const { rows } = await db.query<BulkRow>({
    name: 'stepd_redrive_workflows_by_filter',
    text: `WITH picked AS (${REDRIVABLE} ORDER BY w.id LIMIT $5 FOR UPDATE OF w)
           UPDATE workflows w SET status = 'running' FROM picked WHERE w.id = picked.id AND w.status = 'failed'
           RETURNING ${COLUMNS}`,
    values: values(f),
  });
  return rows;
}

/** What cancelWorkflowsByFilter / redriveWorkflowsByFilter would change, unchanged. */
export async function listWorkflowsByFilter(db: Queryable, action: 'cancel' | 'retry', f: BulkFilter): Promise<BulkRow[]> {
  const { rows } = await db.query<BulkRow>({
    name: action === 'cancel' ? 'stepd_list_cancellable_by_filter' : 'stepd_list_redrivable_by_filter',
    text: `SELECT ${COLUMNS} FROM workflows w WHERE w.id IN (${action === 'cancel' ? CANCELLABLE : REDRIVABLE} ORDER BY w.id LIMIT $5) ORDER BY w.id`,
    values: values(f),
  });
  return rows;
}
