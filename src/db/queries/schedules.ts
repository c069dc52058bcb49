/**
 * Statements on schedules (sql/0014_schedules.sql): what each named schedule starts and as whom,
 * and the one workflow a tick inserts. The cron itself lives in pg-boss (src/schedules/).
 */
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
  /** What a tick does while the previous tick's workflow is live (sql/0033). */
  overlap: OverlapPolicy;
  /** Which ticks missed while no daemon ran are started (sql/0033). */
  catch_up: CatchUpPolicy;
  paused: boolean;
}

export const OVERLAP_POLICIES = ['skip', 'allow', 'cancel-previous'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];
export const CATCH_UP_POLICIES = ['none', 'latest', 'all'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

export interface NewSchedule {
  name: string;
  cron: string;
  tz: string;
  flow: string;
  input: Record<string, unknown>;
  createdBy: string | null;
  overlap?: OverlapPolicy;
  catchUp?: CatchUpPolicy;
}

const COLUMNS = 'name, cron, tz, flow, input, created_by, created_role, created_at, updated_at, overlap, catch_up, paused';

/** Adds the schedule, or replaces the one of that name (`created` tells which). */
export async function upsertSchedule(db: Queryable, s: NewSchedule): Promise<ScheduleRow & { created: boolean }> {
  const { rows } = await db.query<ScheduleRow & { created: boolean }>({
    text: `INSERT INTO schedules (name, cron, tz, flow, input, created_by, overlap, catch_up) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
           ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, tz = EXCLUDED.tz, flow = EXCLUDED.flow,
                                            input = EXCLUDED.input, created_by = EXCLUDED.created_by,
                                            overlap = EXCLUDED.overlap, catch_up = EXCLUDED.catch_up
           RETURNING ${COLUMNS}, (xmax = 0) AS created`,
    values: [s.name, s.cron, s.tz, s.flow, jsonParam(s.input), s.createdBy, s.overlap ?? 'allow', s.catchUp ?? 'none'],
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

/**
 * Pauses or resumes the schedule (`paused`), as the caller: schedules_owner refuses another
 * role's schedule (SQLSTATE 42501) unless the caller is trusted. Undefined when there is none of
 * that name; `changed` is false when it already was so.
 */
export async function setSchedulePausedAsCaller(db: Queryable, name: string, paused: boolean): Promise<(ScheduleRow & { changed: boolean }) | undefined> {
  const { rows } = await db.query<ScheduleRow & { changed: boolean }>({
    name: 'stepd_set_schedule_paused',
    text: `WITH changed AS (UPDATE schedules SET paused = $2 WHERE name = $1 AND paused IS DISTINCT FROM $2 RETURNING ${COLUMNS})
           SELECT *, true AS changed FROM changed
           UNION ALL
           SELECT ${COLUMNS}, false AS changed FROM schedules WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM changed)`,
    values: [name, paused],
  });
  return rows[0];
}

/** What the daemon puts into pg-boss for each schedule (its sync reads only these). */
export type ScheduleTiming = Pick<ScheduleRow, 'name' | 'cron' | 'tz'>;

export async function listScheduleTimings(db: Queryable): Promise<ScheduleTiming[]> {
  const { rows } = await db.query<ScheduleTiming>({ name: 'stepd_list_schedule_timings', text: `SELECT name, cron, tz FROM schedules ORDER BY name` });
  return rows;
}
