/**
 * The progress a running step's tool reported (sql/0010_progress.sql).
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { Queryable } from './common.js';

/** What a tool reported last: `progress` so far, of `total` when known, with an optional message. */
export interface StepProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface ProgressWrite {
  stepId: string;
  executorId: string;
  progress: StepProgress;
  /** NOTIFY a `step.progress` event on this channel for this schema; null: no event. */
  notify: { channel: string; schema: string } | null;
}

/**
 * Writes the latest progress of a step only while this attempt is running under `executorId`:
 * a step that finished, was rescued by another executor, or was cancelled keeps what it had.
 * The same statement NOTIFYs `step.progress` for the row it changed (delivered at commit).
 * Returns whether the row was written.
 */
export async function recordProgressIfRunning(db: Queryable, w: ProgressWrite): Promise<boolean> {
  const { rows } = await db.query<{ written: boolean }>({
    name: 'stepd_record_progress_if_running',
    text: `WITH upd AS (
             UPDATE workflow_steps SET progress = $3::jsonb, updated_at = now()
              WHERE id = $1 AND status = 'running' AND executor_id = $2
             RETURNING id, workflow_id, name, attempt, item_index, progress),
           sent AS (
             SELECT count(pg_notify($4::text, jsonb_strip_nulls(jsonb_build_object(
                      'type', 'step.progress', 'schema', $5::text, 'workflowId', u.workflow_id::text,
                      'stepId', u.id::text, 'step', left(u.name, 200), 'attempt', u.attempt,
                      'itemIndex', u.item_index, 'progress', u.progress, 'at', now()))::text)) AS n
               FROM upd u WHERE $5::text IS NOT NULL)
           SELECT EXISTS (SELECT 1 FROM upd) AS written, (SELECT n FROM sent) AS notified`,
    values: [w.stepId, w.executorId, JSON.stringify(w.progress), w.notify?.channel ?? 'stepd_events', w.notify?.schema ?? null],
  });
  return rows[0]?.written === true;
}
