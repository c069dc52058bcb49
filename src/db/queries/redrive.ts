/**
 * Statements of redrive: a client set a failed workflow back to 'running' (the guard stamped
 * `redrive_requested_at`); the executor takes the request under the workflow row lock and either
 * resumes the workflow or refuses. The stamp is cleared only by the transaction that handles it,
 * so a request survives a crash of the executor.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ErrorData } from '../../errors.js';
import type { StepStatus, WorkflowRow } from '../tables.js';
import { errorParam, type Queryable } from './common.js';

/** Workflows whose redrive was requested, oldest request first, but those in `skip` (deferred for a held lock). */
export async function findRedriveRequests(db: Queryable, limit: number, skip: readonly string[] = []): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_find_redrive_requests',
    text: `SELECT id FROM workflows WHERE redrive_requested_at IS NOT NULL AND id <> ALL($2::bigint[]) ORDER BY redrive_requested_at, id LIMIT $1`,
    values: [limit, skip],
  });
  return rows.map((r) => r.id);
}

export type RedriveRequest = Pick<WorkflowRow, 'id' | 'name' | 'status' | 'flow' | 'input' | 'created_by' | 'created_role' | 'error' | 'step_count' | 'redrives'> & {
  /** Whether created_role is trusted (the database decides, as at admission). */
  role_trusted: boolean;
};

/** Locks a workflow whose redrive is still requested; undefined if handled or locked elsewhere. */
export async function lockWorkflowIfRedriveRequested(db: Queryable, workflowId: string): Promise<RedriveRequest | undefined> {
  const { rows } = await db.query<RedriveRequest>({
    name: 'stepd_lock_workflow_if_redrive_requested_with_role',
    text: `SELECT id, name, status, flow, input, created_by, created_role, error, step_count, redrives,
                  (created_role IS NULL OR stepd_role_is_trusted(created_role)) AS role_trusted FROM workflows
            WHERE id = $1 AND redrive_requested_at IS NOT NULL FOR UPDATE SKIP LOCKED`,
    values: [workflowId],
  });
  return rows[0];
}

/** The columns of a step row a redrive plan reads. */
export interface RedriveStepRow {
  id: string;
  name: string;
  status: StepStatus;
  attempt: number;
  args: unknown;
  result: unknown;
  fanout_id: string | null;
  item_index: number | null;
  fanout_open: boolean;
  first_attempt_id: string | null;
  executor_id: string | null;
  ready_at: Date | null;
}

/** Every step row of a workflow, in creation order: what the redrive plan reads. */
export async function getStepsForRedrive(db: Queryable, workflowId: string): Promise<RedriveStepRow[]> {
  const { rows } = await db.query<RedriveStepRow>({
    name: 'stepd_get_steps_for_redrive',
    text: `SELECT id, name, status, attempt, args, result, fanout_id, item_index, fanout_open, first_attempt_id, executor_id, ready_at
             FROM workflow_steps WHERE workflow_id = $1 ORDER BY id`,
    values: [workflowId],
  });
  return rows;
}

/**
 * Resumes a redriven workflow: running again, its error and end cleared, one more redrive
 * counted, the request cleared, and a fresh deadline when its flow has a timeout.
 */
export async function resumeRedrivenWorkflow(db: Queryable, workflowId: string, timeoutMs: number | undefined): Promise<number> {
  const { rows } = await db.query<{ redrives: number }>({
    name: 'stepd_resume_redriven_workflow',
    text: `UPDATE workflows SET updated_at = now(), status = 'running', error = NULL, output = NULL, completed_at = NULL,
                  redrives = redrives + 1, redrive_requested_at = NULL,
                  deadline_at = CASE WHEN $2::bigint IS NULL THEN NULL ELSE now() + $2::bigint * interval '1 millisecond' END
            WHERE id = $1 AND redrive_requested_at IS NOT NULL
        RETURNING redrives`,
    values: [workflowId, timeoutMs ?? null],
  });
  return rows[0]?.redrives ?? 0;
}

/** Refuses a redrive: the workflow is failed again with `error` (which keeps the original), the request cleared. */
export async function refuseRedrive(db: Queryable, workflowId: string, error: ErrorData): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_refuse_redrive',
    text: `UPDATE workflows SET updated_at = now(), status = 'failed', error = $2::jsonb, redrive_requested_at = NULL,
                  completed_at = coalesce(completed_at, now())
            WHERE id = $1 AND redrive_requested_at IS NOT NULL`,
    values: [workflowId, errorParam(error)],
  });
  return rowCount === 1;
}

/** Drops a request that no longer applies (the workflow was cancelled meanwhile). */
export async function clearRedriveRequest(db: Queryable, workflowId: string): Promise<void> {
  await db.query({
    name: 'stepd_clear_redrive_request',
    text: `UPDATE workflows SET updated_at = now(), redrive_requested_at = NULL WHERE id = $1`,
    values: [workflowId],
  });
}

/**
 * Reopens fork rows that a failFast fan-out failed: done again, their fan-out in progress, so
 * the enclosing joins wait for the branches that run again.
 */
export async function reopenFailedForkRows(db: Queryable, forkIds: string[]): Promise<number> {
  if (forkIds.length === 0) return 0;
  const { rowCount } = await db.query({
    name: 'stepd_reopen_failed_fork_rows',
    text: `UPDATE workflow_steps SET updated_at = now(), status = 'done', error = NULL, fanout_open = true
            WHERE id = ANY($1::bigint[]) AND status = 'failed'`,
    values: [forkIds],
  });
  return rowCount ?? 0;
}
