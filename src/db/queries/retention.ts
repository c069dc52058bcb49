/**
 * Statements of retention (docs/operations.md, "Retention"): finished top-level workflows older
 * than a status's retention, deleted in small batches through the contract's delete_workflows
 * (sql/0020: finished only, the caller's own unless it is trusted, children with their parent,
 * never a parent whose child lives), and old signals (only trusted roles may delete them,
 * sql/0024). Not re-exported by src/db/queries.ts: retention uses them on its own.
 */
import type { Queryable } from './common.js';

export type FinishedStatus = 'completed' | 'failed' | 'cancelled';

export interface PruneFilter {
  status: FinishedStatus;
  /** Finished (completed_at, or cancelled_at) more than this many milliseconds ago. */
  olderThanMs: number;
  /** Only workflows of this name / user (created_by). */
  name?: string;
  user?: string;
  limit: number;
}

/**
 * The candidates: finished top-level workflows of `status` past their retention that the
 * session's role may delete (its own, unless trusted) and none of whose children lives.
 */
const CANDIDATES = `SELECT w.id FROM workflows w
   WHERE w.parent_id IS NULL AND w.status = $1
     AND coalesce(w.completed_at, w.cancelled_at) < now() - $2::bigint * interval '1 millisecond'
     AND ($3::text IS NULL OR w.name = $3) AND ($4::text IS NULL OR w.created_by = $4)
     AND (stepd_role_is_trusted(session_user::text)
          OR coalesce(pg_has_role(session_user, to_regrole(quote_ident(w.created_role))::oid, 'MEMBER'), false))
     AND NOT EXISTS (SELECT 1 FROM workflows c WHERE c.parent_id = w.id AND c.status IN ('new', 'running'))
   ORDER BY coalesce(w.completed_at, w.cancelled_at), w.id LIMIT $5`;

const values = (f: PruneFilter) => [f.status, Math.max(0, Math.round(f.olderThanMs)), f.name ?? null, f.user ?? null, f.limit];

/**
 * Deletes one batch (through delete_workflows, skipping rows another transaction holds), their
 * steps and children with them. Returns the ids deleted.
 */
export async function deleteFinishedWorkflowsPastRetention(db: Queryable, f: PruneFilter): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_delete_finished_workflows_past_retention',
    text: `SELECT id FROM delete_workflows(array(${CANDIDATES} FOR UPDATE OF w SKIP LOCKED)) AS id`,
    values: values(f),
  });
  return rows.map((r) => r.id);
}

export interface PruneCandidate {
  id: string;
  name: string;
  status: FinishedStatus;
  created_by: string | null;
  finished_at: Date;
  /** Rows that go with it: its steps and its sub-workflows' (at any depth), and the sub-workflows. */
  steps: number;
  children: number;
}

/** What a batch would delete, without deleting (`stepd prune --dry-run`). */
export async function listFinishedWorkflowsPastRetention(db: Queryable, f: PruneFilter): Promise<PruneCandidate[]> {
  const { rows } = await db.query<PruneCandidate>({
    name: 'stepd_list_finished_workflows_past_retention',
    text: `WITH RECURSIVE picked AS (${CANDIDATES}),
           tree AS (SELECT id AS root, id FROM picked
                    UNION ALL SELECT t.root, c.id FROM tree t JOIN workflows c ON c.parent_id = t.id)
           SELECT w.id, w.name, w.status, w.created_by, coalesce(w.completed_at, w.cancelled_at) AS finished_at,
                  (SELECT count(*)::int FROM tree t JOIN workflow_steps s ON s.workflow_id = t.id WHERE t.root = w.id) AS steps,
                  (SELECT count(*)::int - 1 FROM tree t WHERE t.root = w.id) AS children
             FROM workflows w JOIN picked p ON p.id = w.id ORDER BY finished_at, w.id`,
    values: values(f),
  });
  return rows;
}

/** Deletes up to `limit` signals older than `olderThanMs` (trusted roles only: the database refuses others). */
export async function deleteSignalsPastRetention(db: Queryable, olderThanMs: number, limit: number, dryRun = false): Promise<number> {
  const pick = `SELECT id FROM signals WHERE created_at < now() - $1::bigint * interval '1 millisecond' ORDER BY created_at, id LIMIT $2`;
  const { rows } = await db.query<{ n: number }>(
    dryRun
      ? { name: 'stepd_count_signals_past_retention', text: `SELECT count(*)::int AS n FROM (${pick}) p`, values: [Math.round(olderThanMs), limit] }
      : {
          name: 'stepd_delete_signals_past_retention',
          text: `WITH gone AS (DELETE FROM signals WHERE id IN (${pick} FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*)::int AS n FROM gone`,
          values: [Math.round(olderThanMs), limit],
        },
  );
  return rows[0]?.n ?? 0;
}

/** Row counts of the two tables (for `stepd prune` and the steady-state scenario). */
export async function countWorkflowAndStepRows(db: Queryable): Promise<{ workflows: number; steps: number }> {
  const { rows } = await db.query<{ workflows: number; steps: number }>({
    name: 'stepd_count_workflow_and_step_rows',
    text: `SELECT (SELECT count(*)::int FROM workflows) AS workflows, (SELECT count(*)::int FROM workflow_steps) AS steps`,
  });
  return rows[0]!;
}
