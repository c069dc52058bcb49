import { describe, expect, it } from 'vitest';
import { PgBoss } from 'pg-boss';
import { latestOccurrenceAtOrBefore, tickKey, type PreviewSchedule } from '../../src/schedules/tickTime.js';

// pg-boss's previewSchedule needs no connection.
const boss = new PgBoss({ db: { executeSql: () => Promise.reject(new Error('no database')) }, schema: 'preview', migrate: false, schedule: false, supervise: false });
const preview: PreviewSchedule = (cron, options) => boss.previewSchedule(cron, options);
const at = (iso: string) => new Date(iso);
const tick = (cron: string, tz: string, when: string) => latestOccurrenceAtOrBefore(preview, cron, tz, at(when))?.toISOString();

describe('the tick a schedule job stands for', () => {
  it('is the latest occurrence at or before the job, so every copy of a job names the same tick', () => {
    expect(tick('* * * * *', 'UTC', '2026-11-25T10:52:35.120Z')).toBe('2026-11-25T10:52:00.000Z');
    expect(tick('* * * * *', 'UTC', '2026-11-25T10:52:59.999Z')).toBe('2026-11-25T10:52:00.000Z');
    expect(tick('* * * * *', 'UTC', '2026-11-25T10:53:00.000Z')).toBe('2026-11-25T10:53:00.000Z');
    expect(tick('*/15 * * * *', 'UTC', '2026-11-25T10:59:10Z')).toBe('2026-11-25T10:45:00.000Z');
  });

  it('reads the cron in the schedule time zone', () => {
    // 09:00 in Paris is 08:00 UTC in November.
    expect(tick('0 9 * * *', 'Europe/Paris', '2026-11-25T08:00:20Z')).toBe('2026-11-25T08:00:00.000Z');
    expect(tick('0 9 * * *', 'Europe/Paris', '2026-11-25T07:59:59Z')).toBe('2026-11-24T08:00:00.000Z');
  });

  it('finds rare occurrences far back (weekdays, yearly)', () => {
    // Monday 2026-11-30 08:00: the previous weekday 09:00 UTC is Friday the 27th.
    expect(tick('0 9 * * 1-5', 'UTC', '2026-11-30T08:00:00Z')).toBe('2026-11-27T09:00:00.000Z');
    expect(tick('0 0 1 1 *', 'UTC', '2026-11-25T00:00:00Z')).toBe('2026-01-01T00:00:00.000Z');
  });

  it('has a key per schedule and tick', () => {
    expect(tickKey('digest', at('2026-12-01T07:30:00Z'))).toBe('schedule:digest:2026-12-01T07:30:00.000Z');
  });
});
