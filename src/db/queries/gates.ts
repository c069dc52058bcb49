/**
 * Statements on gates: a readying the executor refuses (approval.approvers, approval.schema)
 * puts the gate back to waiting, fenced on the attempt this executor claimed.
 */
import type { ErrorData } from '../../errors.js';
import { errorParam, type Queryable } from './common.js';

/** Whether a database role may act as anyone (superuser, executor or owner member), as admission decides it. */
export async function isRoleTrusted(db: Queryable, role: string): Promise<boolean> {
  const { rows } = await db.query<{ trusted: boolean }>({
    name: 'stepd_is_role_trusted',
    text: `SELECT stepd_role_is_trusted($1) AS trusted`,
    values: [role],
  });
  return rows[0]?.trusted === true;
}

export interface ReturnedGate {
  id: string;
  workflow_id: string;
  name: string;
  attempt: number;
  item_index: number | null;
  args: unknown;
}

/**
 * Puts a claimed gate back to `pending` with the refusal in `error` (cleared when it completes)
 * and the refused readying forgotten (result, readied_*), only while it is still running under
 * this executor. Undefined when it is not (cancelled meanwhile, or no longer ours).
 */
export async function returnGateToWaitingIfRunning(
  db: Queryable,
  gate: { id: string; executorId: string; refusal: ErrorData },
): Promise<ReturnedGate | undefined> {
  const { rows } = await db.query<ReturnedGate>({
    name: 'stepd_return_gate_to_waiting_if_running',
    text: `UPDATE workflow_steps
              SET updated_at = now(), status = 'pending', error = $3::jsonb, result = NULL,
                  readied_by = NULL, readied_at = NULL, readied_role = NULL, ready_at = NULL,
                  started_at = NULL, lease_until = NULL, executor_id = NULL
            WHERE id = $1 AND status = 'running' AND executor_id = $2 AND tool IS NULL
        RETURNING id::text, workflow_id::text, name, attempt, item_index, args`,
    values: [gate.id, gate.executorId, errorParam(gate.refusal)],
  });
  return rows[0];
}
