/**
 * Executor liveness: registering, beating, deregistering, and the leader's questions about
 * executors that stopped beating. Part of the runtime statement catalogue (src/db/queries.ts
 * re-exports every module).
 *
 * An executor is presumed dead when its last beat is older than the dead_after_ms it declared —
 * and the server itself has been up at least that long: after a PostgreSQL restart every beat is
 * old, and live executors get the same time to reconnect and beat before anyone is rescued.
 */
import { type Queryable } from './common.js';

export interface ExecutorRegistration {
  id: string;
  host: string;
  pid: number;
  heartbeatIntervalMs: number;
  deadAfterMs: number;
  concurrency?: number;
  version?: string;
}

/** Registers (or re-registers, after a restart with the same id) an executor as beating now. */
export async function registerExecutor(db: Queryable, r: ExecutorRegistration): Promise<void> {
  await db.query({
    name: 'stepd_register_executor',
    text: `INSERT INTO executors (id, started_at, last_beat_at, host, pid, heartbeat_interval_ms, dead_after_ms, concurrency, version)
           VALUES ($1, now(), now(), $2, $3, $4, $5, $6, $7)
           ON CONFLICT (id) DO UPDATE
              SET started_at = now(), last_beat_at = now(), host = $2, pid = $3,
                  heartbeat_interval_ms = $4, dead_after_ms = $5, concurrency = $6, version = $7`,
    values: [r.id, r.host, r.pid, r.heartbeatIntervalMs, r.deadAfterMs, r.concurrency ?? null, r.version ?? null],
  });
}

/** One beat. False when the row is gone: the leader presumed this executor dead and forgot it. */
export async function beatExecutor(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_beat_executor',
    text: `UPDATE executors SET last_beat_at = greatest(now(), started_at) WHERE id = $1`,
    values: [id],
  });
  return (rowCount ?? 0) > 0;
}

/** A clean shutdown: the executor is gone and has handed back its steps. */
export async function deregisterExecutor(db: Queryable, id: string): Promise<void> {
  await db.query({ name: 'stepd_deregister_executor', text: `DELETE FROM executors WHERE id = $1`, values: [id] });
}

/**
 * An SQL condition on a step row aliased `s`: its executor is alive and answering for it — the
 * executor beat within the dead-after it declared, and the session holding its executor id (its
 * listener's, in executor_leases) is open. Such an executor rescues its own steps past their
 * lease, except those whose outcome it holds (recovery.ts, rescueOwnStepsPastLease), so the
 * leader leaves them alone. A killed executor's session closes at once: its steps are the
 * leader's again as soon as their lease runs out, as before. A constant (no value is built in).
 */
export const STEP_EXECUTOR_ALIVE = `EXISTS (
             SELECT 1 FROM executors e JOIN executor_leases l ON l.name = 'executor:' || e.id
              WHERE e.id = s.executor_id
                AND e.last_beat_at >= now() - e.dead_after_ms * interval '1 millisecond'
                AND stepd_executor_session_alive(l.session_pid, l.session_app))`;

export interface DeadExecutorStep {
  id: string;
  workflow_id: string;
  executor_id: string;
  /** Milliseconds since that executor's last beat. */
  silent_ms: number;
}

/**
 * Running steps of executors presumed dead (never `self`, which is asking, so alive), oldest
 * beat first. Each must still be finished fenced by `status = 'running' AND executor_id`.
 */
export async function findStepsOfDeadExecutors(db: Queryable, self: string, limit: number): Promise<DeadExecutorStep[]> {
  const { rows } = await db.query<DeadExecutorStep>({
    name: 'stepd_find_steps_of_dead_executors',
    text: `WITH dead AS (
             SELECT id, last_beat_at FROM executors
              WHERE id <> $1
                AND last_beat_at < now() - dead_after_ms * interval '1 millisecond'
                AND pg_postmaster_start_time() < now() - dead_after_ms * interval '1 millisecond')
           SELECT s.id::text AS id, s.workflow_id::text AS workflow_id, s.executor_id,
                  (extract(epoch FROM now() - d.last_beat_at) * 1000)::int AS silent_ms
             FROM dead d JOIN workflow_steps s ON s.executor_id = d.id AND s.status = 'running'
            ORDER BY d.last_beat_at, s.id
            LIMIT $2`,
    values: [self, limit],
  });
  return rows;
}

/**
 * Deletes the rows of executors presumed dead that no longer run any step (their steps were
 * rescued): the table lists live executors. One that was only slow registers again when it beats.
 */
export async function forgetDeadExecutorsWithoutSteps(db: Queryable, self: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_forget_dead_executors_without_steps',
    text: `DELETE FROM executors e
            WHERE e.id <> $1
              AND e.last_beat_at < now() - e.dead_after_ms * interval '1 millisecond'
              AND pg_postmaster_start_time() < now() - e.dead_after_ms * interval '1 millisecond'
              AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.executor_id = e.id AND s.status = 'running')
        RETURNING e.id`,
    values: [self],
  });
  return rows.map((r) => r.id);
}

export interface ExecutorRow {
  id: string;
  started_at: Date;
  last_beat_at: Date;
  host: string;
  pid: number;
  heartbeat_interval_ms: number;
  dead_after_ms: number;
  concurrency: number | null;
  version: string | null;
}

/** Every registered executor, for status views. */
export async function listExecutors(db: Queryable): Promise<ExecutorRow[]> {
  const { rows } = await db.query<ExecutorRow>({ name: 'stepd_list_executors', text: `SELECT * FROM executors ORDER BY id` });
  return rows;
}
