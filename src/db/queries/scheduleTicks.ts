/**
 * Statements of one schedule tick under the schedule's policies (sql/0033), run by the daemon on
 * an executor connection inside one transaction (src/schedules/tickStart.ts): the schedule's tick
 * record is locked, so two daemons working copies of one job, or the catch-up and a job, take
 * turns; a tick starts only when it is later than the last one recorded.
 */
import { tickKey } from '../../schedules/tickTime.js';
import { jsonParam, type Queryable } from './common.js';
import type { ScheduleRow } from './schedules.js';

/** The executor's wake-up channel (src/executor/wakeups/listener.ts). */
const WAKEUP_CHANNEL = 'stepd_wakeup';

export interface TickRecord {
  /** The tick asked about is not later than the last one handled. */
  not_later: boolean;
  last_workflow_id: string | null;
  /** That workflow's status, null when there is none (never started, or deleted since). */
  last_status: string | null;
}

/** The schedule's tick record, created if missing (no tick yet: -infinity), locked until the transaction ends; compared with `tick`. */
export async function lockTickRecordForUpdate(db: Queryable, name: string, tick: Date): Promise<TickRecord> {
  await db.query({
    name: 'stepd_ensure_tick_record',
    text: `INSERT INTO schedule_ticks (name, last_tick) VALUES ($1, '-infinity') ON CONFLICT (name) DO NOTHING`,
    values: [name],
  });
  const { rows } = await db.query<TickRecord>({
    name: 'stepd_lock_tick_record',
    text: `SELECT k.last_tick >= $2 AS not_later, k.last_workflow_id::text AS last_workflow_id, w.status AS last_status
             FROM schedule_ticks k LEFT JOIN workflows w ON w.id = k.last_workflow_id
            WHERE k.name = $1
              FOR UPDATE OF k`,
    values: [name, tick],
  });
  return rows[0]!;
}

/** Records `tick` as the last one handled (started or skipped), and the workflow it started if any. */
export async function recordTickIfLater(db: Queryable, name: string, tick: Date, workflowId: string | null): Promise<void> {
  await db.query({
    name: 'stepd_record_tick_if_later',
    text: `UPDATE schedule_ticks SET last_tick = $2, last_workflow_id = coalesce($3::bigint, last_workflow_id), updated_at = now()
            WHERE name = $1 AND last_tick < $2`,
    values: [name, tick, workflowId],
  });
}

/**
 * The tick's workflow (key `schedule:NAME:<tick time>`, ON CONFLICT DO NOTHING), started by name
 * with flow NULL, as the schedule's user, answered for by the role that wrote the schedule; wakes
 * every executor. Undefined when a workflow with that key exists already.
 */
export async function insertTickWorkflowByKey(db: Queryable, t: { schema: string; schedule: ScheduleRow; tick: Date }): Promise<string | undefined> {
  const s = t.schedule;
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_insert_tick_workflow_by_key',
    text: `WITH inserted AS (
             INSERT INTO workflows (name, flow, input, created_by, created_role, key)
             VALUES ($1, NULL, $2::jsonb, $3, $4, $5)
             ON CONFLICT (key) DO NOTHING
             RETURNING id)
           SELECT id::text AS id, pg_notify($6, json_build_object('schema', $7::text, 'table', 'workflows', 'id', id, 'status', 'new')::text)
             FROM inserted`,
    values: [s.flow, jsonParam(s.input), s.created_by, s.created_role, tickKey(s.name, t.tick), WAKEUP_CHANNEL, t.schema],
  });
  return rows[0]?.id;
}

/** Cancels the workflow if it is still new or running (overlap `cancel-previous`; its live steps are cancelled by workflows_cancel_steps); true when it did. */
export async function cancelWorkflowIfLive(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'stepd_cancel_previous_tick_workflow_if_live',
    text: `UPDATE workflows SET status = 'cancelled', cancelled_at = now(), updated_at = now() WHERE id = $1 AND status IN ('new', 'running')`,
    values: [id],
  });
  return (rowCount ?? 0) > 0;
}

export interface CatchUpCandidate {
  name: string;
  cron: string;
  tz: string;
  catch_up: 'latest' | 'all';
  /** Missed ticks are looked for after this: the later of the last tick handled and the schedule's last write. */
  since: Date;
  /** The database's clock (the ticks are judged by it, not by the daemon's). */
  now: Date;
}

/** Schedules that catch up missed ticks and are not paused, with where to look from. Read-only. */
export async function listCatchUpCandidates(db: Queryable): Promise<CatchUpCandidate[]> {
  const { rows } = await db.query<CatchUpCandidate>({
    name: 'stepd_list_catch_up_candidates',
    text: `SELECT s.name, s.cron, s.tz, s.catch_up, greatest(s.updated_at, k.last_tick) AS since, now() AS now
             FROM schedules s LEFT JOIN schedule_ticks k ON k.name = s.name
            WHERE s.catch_up IN ('latest', 'all') AND NOT s.paused
            ORDER BY s.name`,
  });
  return rows;
}
