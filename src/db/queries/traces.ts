/** What a workflow's trace span needs once it ended: its name, status, error code and times. */
import type { Queryable } from './common.js';

export interface WorkflowSpanRow {
  id: string;
  name: string;
  status: string;
  error_code: string | null;
  error_message: string | null;
  /** The parent workflow of a sub-workflow. */
  parent_id: string | null;
  /** When it was admitted (created_at for one refused at admission). */
  started_at: Date;
  ended_at: Date | null;
}

/** The ended workflows among `ids` (the others are skipped), by primary key. */
export async function getEndedWorkflowSpans(db: Queryable, ids: string[]): Promise<WorkflowSpanRow[]> {
  const { rows } = await db.query<WorkflowSpanRow>({
    name: 'stepd_get_ended_workflow_spans',
    text: `SELECT id::text, name, status, error->>'code' AS error_code, left(error->>'message', 500) AS error_message,
                  parent_id::text, coalesce(started_at, created_at) AS started_at, coalesce(completed_at, cancelled_at) AS ended_at
             FROM workflows WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'cancelled')`,
    values: [ids],
  });
  return rows;
}

/** The cluster's system identifier and the database name: what tells one deployment's traces from another's. */
export async function readDatabaseIdentity(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ identity: string }>({
    name: 'stepd_read_database_identity',
    text: `SELECT s.system_identifier::text || '/' || current_database() AS identity FROM pg_control_system() s`,
  });
  return rows[0]?.identity ?? '';
}
