/**
 * The executor's side of worker tools (sql/0027, docs/workers.md): handing a claimed step to the
 * workers, and turning worker leases that ran out into `lost` outcomes. The workers' side is the
 * SQL contract itself (take_tasks, finish_task, fail_task, extend_task, progress_task).
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { Queryable } from './common.js';
import { STEP_EXECUTOR_ALIVE } from './executors.js';

/** The channel that wakes idle workers when a task becomes takeable (a hint: they call take_tasks). */
export const TASKS_CHANNEL = 'stepd_tasks';

/**
 * Hands a step this executor claimed to the workers: `pending` with its timeout, no owner, no
 * lease, only while it is still `running` here and has not been handed before. NOTIFYs
 * `stepd_tasks` ({schema, tool}) in the same statement. Returns whether the row was handed.
 */
export async function handStepToWorkersIfRunning(
  db: Queryable,
  h: { id: string; executorId: string; timeoutMs: number; schema: string },
): Promise<boolean> {
  const { rows } = await db.query<{ handed: boolean }>({
    name: 'stepd_hand_step_to_workers_if_running',
    text: `WITH handed AS (
             UPDATE workflow_steps
                SET status = 'pending', executor_id = NULL, lease_until = NULL, started_at = NULL, ready_at = coalesce(ready_at, now()),
                    task_timeout_ms = $3, updated_at = now()
              WHERE id = $1 AND status = 'running' AND executor_id = $2 AND task_timeout_ms IS NULL
             RETURNING id, tool),
           woken AS (
             SELECT count(pg_notify('${TASKS_CHANNEL}', json_build_object('schema', $4::text, 'tool', h.tool)::text)) AS n FROM handed h)
           SELECT EXISTS (SELECT 1 FROM handed) AS handed, (SELECT n FROM woken) AS woken`,
    values: [h.id, h.executorId, h.timeoutMs, h.schema],
  });
  return rows[0]?.handed === true;
}

/**
 * Worker tasks whose lease ran out become ready with a `lost` error (`timeout` past their
 * deadline), for the executor to record as a failed attempt and retry (stepd_expire_tasks,
 * which also wakes the executors). Returns how many.
 */
export async function expireWorkerTasksPastLease(db: Queryable, limit: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'stepd_expire_worker_tasks_past_lease',
    text: 'SELECT stepd_expire_tasks($1) AS n',
    values: [limit],
  });
  return rows[0]?.n ?? 0;
}

/**
 * Reported worker steps (sql/0027) that an executor claimed to record and then left — it stopped
 * heartbeating, or its lease ran out and it is not alive (a live one answers for its own) — go back to `ready` with the report, not `lost`: the
 * worker's result is kept and recorded by the next claim (the work is not done again). Leader
 * duty, beside the watchdog's other rescues. Returns how many.
 */
export async function handBackReportedWorkerSteps(db: Queryable, executorId: string): Promise<number> {
  const { rowCount } = await db.query({
    name: 'stepd_hand_back_reported_worker_steps',
    text: `UPDATE workflow_steps s SET updated_at = now(), status = 'ready', lease_until = NULL, executor_id = NULL
            WHERE s.status = 'running' AND s.task_ended IS NOT NULL AND s.executor_id <> $1
              AND ((s.lease_until < now() AND NOT ${STEP_EXECUTOR_ALIVE})
                   OR EXISTS (SELECT 1 FROM executors e
                               WHERE e.id = s.executor_id
                                 AND e.last_beat_at < now() - e.dead_after_ms * interval '1 millisecond'
                                 AND pg_postmaster_start_time() < now() - e.dead_after_ms * interval '1 millisecond'))`,
    values: [executorId],
  });
  return rowCount ?? 0;
}
