/**
 * Statements on schedules (sql/0014_schedules.sql): what each named schedule starts and as whom,
 * and the one workflow a tick inserts. The cron itself lives in pg-boss (src/schedules/).
 */
import { tickKey } from '../../schedules/tickTime.js';
import { jsonParam, type Queryable } from './common.js';

export interface ScheduleRow {
  name: string;
  cron: string;
  tz: string;
  flow: string;
  input: Record<string, unknown>;
  created_by: string | null;
  /** session_user of the insert or last update (stamped by the database). */
  created_role: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface NewSchedule {
  name: string;
  cron: string;
  tz: string;
  flow: string;
  input: Record<string, unknown>;
  createdBy: string | null;
}

/** The executor's wake-up channel (src/executor/listener.ts). */
const WAKEUP_CHANNEL = 'stepd_wakeup';

const COLUMNS = 'name, cron, tz, flow, input, created_by, created_role, created_at, updated_at';

/** Adds the schedule, or replaces the one of that name (`created` tells which). */
export async function upsertSchedule(db: Queryable, s: NewSchedule): Promise<ScheduleRow & { created: boolean }> {
  const { rows } = await db.query<ScheduleRow & { created: boolean }>({
    text: `INSERT INTO schedules (name, cron, tz, flow, input, created_by) VALUES ($1, $2, $3, $4, $5::jsonb, $6)
           ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, tz = EXCLUDED.tz, flow = EXCLUDED.flow,
                                            input = EXCLUDED.input, created_by = EXCLUDED.created_by
           RETURNING ${COLUMNS}, (xmax = 0) AS created`,
    values: [s.name, s.cron, s.tz, s.flow, jsonParam(s.input), s.createdBy],
  });
  return rows[0]!;
}

export async function getSchedule(db: Queryable, name: string): Promise<ScheduleRow | undefined> {
  const { rows } = await db.query<ScheduleRow>({
    name: 'stepd_get_schedule',
    text: `SELECT ${COLUMNS} FROM schedules WHERE name = $1`,
    values: [name],
  });
  return rows[0];
}

/** Whether any schedule exists (the daemon starts pg-boss only then). */
export async function anySchedule(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>({ name: 'stepd_any_schedule', text: `SELECT EXISTS (SELECT 1 FROM schedules) AS any` });
  return rows[0]?.any === true;
}

export async function listSchedules(db: Queryable): Promise<ScheduleRow[]> {
  const { rows } = await db.query<ScheduleRow>({ text: `SELECT ${COLUMNS} FROM schedules ORDER BY name` });
  return rows;
}

/**
 * Removes the schedule through remove_schedule (sql/0020: clients hold no DELETE on the table),
 * which refuses another role's schedule (SQLSTATE 42501) unless the caller is trusted;
 * `undefined` when there was none of that name.
 */
export async function deleteOwnSchedule(db: Queryable, name: string): Promise<ScheduleRow | undefined> {
  const { rows } = await db.query<ScheduleRow>({ name: 'stepd_remove_schedule', text: `SELECT ${COLUMNS} FROM remove_schedule($1)`, values: [name] });
  return rows[0];
}

/** What the daemon puts into pg-boss for each schedule (its sync reads only these). */
export type ScheduleTiming = Pick<ScheduleRow, 'name' | 'cron' | 'tz'>;

export async function listScheduleTimings(db: Queryable): Promise<ScheduleTiming[]> {
  const { rows } = await db.query<ScheduleTiming>({ name: 'stepd_list_schedule_timings', text: `SELECT name, cron, tz FROM schedules ORDER BY name` });
  return rows;
}

/**
 * A tick's workflow, started at most once and only in order: the tick is recorded as the
 * schedule's last started one (`schedule_ticks`, executor-only) only when it is later than the
 * one recorded, and the workflow is inserted in the same statement (key
 * `schedule:NAME:<tick time>`, ON CONFLICT DO NOTHING). So a duplicate, retried or replayed job
 * never starts a tick again — even after that tick's workflow was deleted — nor an earlier one.
 * The workflow is started by name with flow NULL (the registry's latest version at admission),
 * as the schedule's user, answered for by the role that wrote the schedule (admission checks
 * that role's `clients.actAs`). Runs on an executor connection (the guard would stamp the
 * executor's own role otherwise) and wakes every executor, as a client's insert does. Returns
 * the new id, or `undefined` when the tick is not later than the last one started.
 */
export async function insertTickWorkflowIfLater(db: Queryable, t: { schema: string; schedule: ScheduleRow; tick: Date }): Promise<string | undefined> {
  const s = t.schedule;
  const { rows } = await db.query<{ id: string }>({
    name: 'stepd_insert_tick_workflow_if_later',
    text: `WITH recorded AS (
             INSERT INTO schedule_ticks AS k (name, last_tick) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET last_tick = EXCLUDED.last_tick, updated_at = now()
              WHERE k.last_tick < EXCLUDED.last_tick
             RETURNING name),
           inserted AS (
             INSERT INTO workflows (name, flow, input, created_by, created_role, key)
             SELECT $3, NULL, $4::jsonb, $5, $6, $7 FROM recorded
             ON CONFLICT (key) DO NOTHING
             RETURNING id)
           SELECT id, pg_notify($8, json_build_object('schema', $9::text, 'table', 'workflows', 'id', id, 'status', 'new')::text)
             FROM inserted`,
    values: [s.name, t.tick, s.flow, jsonParam(s.input), s.created_by, s.created_role, tickKey(s.name, t.tick), WAKEUP_CHANNEL, t.schema],
  });
  return rows[0]?.id;
}
