/**
 * Adding and removing schedules, as `stepd schedule` does it: only stepd's `schedules` row (what
 * runs, when, as whom) is written, on the caller's connection, so the database records the
 * caller's role. The daemon keeps pg-boss's schedules in step with that table (scheduler.ts):
 * clients have no access to pg-boss's schema. Refusals are ScheduleError with a code and a
 * message that says how to fix it: an unknown flow, a cron pg-boss cannot read, an unknown time zone.
 */
import type pg from 'pg';
import { PgBoss } from 'pg-boss';
import { loadFlowVersion } from '../db/queries/flows.js';
import { deleteOwnSchedule, upsertSchedule, type NewSchedule, type ScheduleRow } from '../db/queries/schedules.js';

export type ScheduleErrorCode = 'invalid_schedule' | 'unknown_flow' | 'not_found';

export class ScheduleError extends Error {
  readonly retryable = false;
  constructor(
    readonly code: ScheduleErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ScheduleError';
  }
}

const CRON_HINT = 'use five fields, minute hour day-of-month month day-of-week, e.g. "*/15 * * * *" (every 15 minutes) or "0 9 * * 1-5" (09:00 on weekdays)';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

export function checkScheduleName(name: string): void {
  if (!NAME.test(name)) {
    throw new ScheduleError('invalid_schedule', `schedule name ${JSON.stringify(name)} is not valid: use letters, digits, '_', '.' and '-' (starting with a letter or digit), at most 100 characters`);
  }
}

export function checkTimeZone(tz: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new ScheduleError('invalid_schedule', `unknown time zone ${JSON.stringify(tz)}: use an IANA name such as UTC, Europe/Paris or America/New_York`);
  }
}

/** The next `count` occurrences; refuses an expression pg-boss cannot read, saying why. */
export function nextOccurrences(cron: string, tz: string, count: number, from: Date = new Date()): Date[] {
  // cron-parser fills in missing fields ("* * *" would run every minute): stepd asks for all five.
  // Macros (@daily) and RFC 5545 rules (FREQ=…), which pg-boss also reads, are left to it.
  const fields = cron.trim().split(/\s+/);
  if (!/^(@|FREQ=|RRULE:|DTSTART)/i.test(cron.trim()) && fields.length !== 5) {
    throw new ScheduleError('invalid_schedule', `cron expression ${JSON.stringify(cron)} has ${fields.length} field(s)\n  ${CRON_HINT}`);
  }
  // previewSchedule needs no connection; the throwaway db is never called.
  const boss = new PgBoss({ db: { executeSql: () => Promise.reject(new Error('not connected')) }, schema: 'stepd_preview', migrate: false, schedule: false, supervise: false });
  try {
    return boss.previewSchedule(cron, { tz, from, count });
  } catch (err) {
    throw new ScheduleError(
      'invalid_schedule',
      `cron expression ${JSON.stringify(cron)} cannot be read: ${(err as Error).message}\n  ${CRON_HINT}`,
    );
  }
}

/**
 * Adds the schedule (or replaces the one of that name) after checking the name, the time zone,
 * the cron and that the flow is registered. The daemon schedules it in pg-boss within its sync
 * interval (docs/schedules.md).
 */
export async function addSchedule(client: pg.ClientBase, _schema: string, s: NewSchedule): Promise<ScheduleRow & { created: boolean }> {
  checkScheduleName(s.name);
  checkTimeZone(s.tz);
  nextOccurrences(s.cron, s.tz, 1);
  if (!(await loadFlowVersion(client, s.flow, null))) {
    throw new ScheduleError('unknown_flow', `flow ${JSON.stringify(s.flow)} is not registered; register it first (stepd flow put FILE --name ${s.flow}) — see stepd flow list`);
  }
  return upsertSchedule(client, s);
}

/** Removes the schedule (the daemon unschedules it in pg-boss); ticks already started keep running. */
export async function removeSchedule(client: pg.ClientBase, _schema: string, name: string): Promise<ScheduleRow> {
  const row = await deleteOwnSchedule(client, name);
  if (!row) throw new ScheduleError('not_found', `there is no schedule named ${JSON.stringify(name)} (stepd schedule list)`);
  return row;
}
