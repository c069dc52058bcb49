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
 * Hands steps this executor claimed to the workers, in one statement: each `pending` with its
 * timeout, no owner, no lease, only while it is still `running` here and has not been handed
 * before. NOTIFYs `stepd_tasks` ({schema, tool}) once per tool in the same statement: one
 * notifying commit per batch, not per step (such commits run one at a time server-wide).
 * Returns the ids that were handed.
 */
export async function handStepsToWorkersIfRunning(
  db: Queryable,
  h: { executorId: string; schema: string; steps: readonly { id: string; timeoutMs: number }[] },
): Promise<Set<string>> {
  const steps = [...h.steps].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_hand_steps_to_workers_if_running',
    text: `WITH handed AS (
             UPDATE workflow_steps s
                SET status = 'pending', executor_id = NULL, lease_until = NULL, started_at = NULL, ready_at = coalesce(s.ready_at, now()),
                    task_timeout_ms = h.timeout_ms, updated_at = now()
               FROM unnest($1::bigint[], $2::int[]) AS h(id, timeout_ms)
              WHERE s.id = h.id AND s.status = 'running' AND s.executor_id = $3 AND s.task_timeout_ms IS NULL
             RETURNING s.id, s.tool),
           woken AS (
             SELECT count(pg_notify('${TASKS_CHANNEL}', json_build_object('schema', $4::text, 'tool', t.tool)::text)) AS n
               FROM (SELECT DISTINCT tool FROM handed) t)
           SELECT h.id::text AS id FROM handed h WHERE (SELECT n FROM woken) >= 0`,
    values: [steps.map((s) => s.id), steps.map((s) => s.timeoutMs), h.executorId, h.schema],
  });
  return new Set(rows.map((r) => String(r.id)));
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
