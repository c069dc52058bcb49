/**
 * Adding and removing schedules, as `stepd schedule` does it: stepd's row (what runs, as whom)
 * and pg-boss's schedule (when) are written in one transaction on the caller's connection, so
 * neither exists without the other. Refusals are ScheduleError with a code and a message that
 * says how to fix it: an unknown flow, a cron pg-boss cannot read, an unknown time zone.
 */
import type pg from 'pg';
import { PgBoss } from 'pg-boss';
import { loadFlowVersion } from '../db/queries/flows.js';
import { deleteSchedule, upsertSchedule, type NewSchedule, type ScheduleRow } from '../db/queries/schedules.js';
import { bossSchemaName, clientDb, SCHEDULE_QUEUE } from './bossSchema.js';

export type ScheduleErrorCode = 'invalid_schedule' | 'unknown_flow' | 'not_found' | 'not_migrated';

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

/** A pg-boss that is never started: only its validation and its statements on `client`. */
function bossOn(client: pg.ClientBase, schema: string): PgBoss {
  return new PgBoss({ db: clientDb(client), schema: bossSchemaName(schema), migrate: false, schedule: false, supervise: false });
}

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
 * the cron and that the flow is registered. `client` must not be inside a transaction.
 */
export async function addSchedule(client: pg.ClientBase, schema: string, s: NewSchedule): Promise<ScheduleRow & { created: boolean }> {
  checkScheduleName(s.name);
  checkTimeZone(s.tz);
  nextOccurrences(s.cron, s.tz, 1);
  await assertBossInstalled(client, schema);
  if (!(await loadFlowVersion(client, s.flow, null))) {
    throw new ScheduleError('unknown_flow', `flow ${JSON.stringify(s.flow)} is not registered; register it first (stepd flow put FILE --name ${s.flow}) — see stepd flow list`);
  }
  await client.query('BEGIN');
  try {
    const row = await upsertSchedule(client, s);
    await bossOn(client, schema).schedule(SCHEDULE_QUEUE, s.cron, { schedule: s.name }, { tz: s.tz, key: s.name });
    await client.query('COMMIT');
    return row;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** Removes the schedule from both tables; ticks already started keep running. */
export async function removeSchedule(client: pg.ClientBase, schema: string, name: string): Promise<ScheduleRow> {
  await assertBossInstalled(client, schema);
  await client.query('BEGIN');
  try {
    const row = await deleteSchedule(client, name);
    if (!row) throw new ScheduleError('not_found', `there is no schedule named ${JSON.stringify(name)} (stepd schedule list)`);
    await bossOn(client, schema).unschedule(SCHEDULE_QUEUE, name);
    await client.query('COMMIT');
    return row;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

async function assertBossInstalled(client: pg.ClientBase, schema: string): Promise<void> {
  const { rows } = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [`"${bossSchemaName(schema)}".schedule`]);
  if (!rows[0]?.t) throw new ScheduleError('not_migrated', `pg-boss's schema ${bossSchemaName(schema)} is missing: run \`stepd migrate\` (schedules need it)`);
}
