/**
 * The CLI's writes, made exactly as any other service makes them: through the SQL contract
 * (DESIGN.md, top), on a client connection without the executor marker, so the guard triggers
 * apply. Each statement is guarded by the state it expects; `undefined` means the row was not
 * in that state (or does not exist) and the caller reads it again to say why.
 */
import type { Queryable } from './queries.js';
import type { StepRow, WorkflowRow } from './tables.js';

export interface NewWorkflow {
  name: string;
  /** The flow JSON; null starts the registered flow called `name` (its latest version, or `flowVersion`). */
  flow: unknown;
  flowVersion?: number | null;
  input: Record<string, unknown>;
  createdBy: string | null;
  key: string | null;
  /** Not admitted before this (`stepd run --at`): a time, or a delay from the database's now(). */
  startAt?: { at: Date } | { inMs: number };
}

/** Inserts a workflow; with a key that exists already, inserts nothing and returns `undefined`. */
export async function insertWorkflow(db: Queryable, wf: NewWorkflow): Promise<Pick<WorkflowRow, 'id' | 'name' | 'status' | 'start_at'> | undefined> {
  const at = wf.startAt && 'at' in wf.startAt ? wf.startAt.at.toISOString() : null;
  const inMs = wf.startAt && 'inMs' in wf.startAt ? wf.startAt.inMs : null;
  const { rows } = await db.query<Pick<WorkflowRow, 'id' | 'name' | 'status' | 'start_at'>>({
    text: `INSERT INTO workflows (name, flow, input, created_by, key, flow_version, start_at)
           VALUES ($1, $2::jsonb, $3::jsonb, $4, $5, $6, coalesce($7::timestamptz, now() + $8::float8 * interval '1 millisecond'))
           ON CONFLICT (key) DO NOTHING
           RETURNING id, name, status, start_at`,
    values: [wf.name, wf.flow === null || wf.flow === undefined ? null : JSON.stringify(wf.flow), JSON.stringify(wf.input), wf.createdBy, wf.key, wf.flowVersion ?? null, at, inMs],
  });
  return rows[0];
}

/**
 * Readies a pending step (approves a gate, or reports that an external task finished).
 * `result` undefined leaves the result column alone (a gate then reads `{"approved": true}`).
 */
export async function readyPendingStep(
  db: Queryable,
  step: { id: string; result?: unknown; readiedBy: string | null },
): Promise<Pick<StepRow, 'id' | 'workflow_id' | 'name' | 'status' | 'result' | 'readied_by' | 'readied_at'> | undefined> {
  const { rows } = await db.query<Pick<StepRow, 'id' | 'workflow_id' | 'name' | 'status' | 'result' | 'readied_by' | 'readied_at'>>({
    text: `UPDATE workflow_steps
              SET status = 'ready',
                  result = CASE WHEN $2::boolean THEN $3::jsonb ELSE result END,
                  readied_by = $4
            WHERE id = $1 AND status = 'pending'
        RETURNING id, workflow_id, name, status, result, readied_by, readied_at`,
    values: [step.id, step.result !== undefined, step.result === undefined ? null : JSON.stringify(step.result), step.readiedBy],
  });
  return rows[0];
}

/** Cancels a workflow that is new or running; its live steps are cancelled by a trigger. */
export async function cancelWorkflowIfActive(db: Queryable, id: string): Promise<Pick<WorkflowRow, 'id' | 'name' | 'status' | 'cancelled_at'> | undefined> {
  const { rows } = await db.query<Pick<WorkflowRow, 'id' | 'name' | 'status' | 'cancelled_at'>>({
    text: `UPDATE workflows SET status = 'cancelled'
            WHERE id = $1 AND status IN ('new', 'running')
        RETURNING id, name, status, cancelled_at`,
    values: [id],
  });
  return rows[0];
}

/**
 * Redrives a failed workflow (the guard stamps the request; the executor gives its failed steps
 * new attempts, or refuses and fails it again with code `redrive_refused`). `undefined` when it
 * was not failed. The guard raises for a workflow that failed before it was admitted.
 */
export async function redriveWorkflowIfFailed(
  db: Queryable,
  id: string,
): Promise<Pick<WorkflowRow, 'id' | 'name' | 'status' | 'redrives' | 'redrive_requested_at'> | undefined> {
  const { rows } = await db.query<Pick<WorkflowRow, 'id' | 'name' | 'status' | 'redrives' | 'redrive_requested_at'>>({
    text: `UPDATE workflows SET status = 'running'
            WHERE id = $1 AND status = 'failed'
        RETURNING id, name, status, redrives, redrive_requested_at`,
    values: [id],
  });
  return rows[0];
}
