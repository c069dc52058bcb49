/**
 * A schedule as `stepd schedule list --json` and the MCP tool `list_schedules` show it: its row
 * in the names the CLI prints, and when it ticks next (null while paused, or for a cron or time
 * zone that cannot be read).
 */
import type { ScheduleRow } from '../../db/queries/schedules.js';
import { nextOccurrences } from '../../schedules/scheduleStore.js';

export function scheduleView(r: ScheduleRow) {
  return { name: r.name, cron: r.cron, tz: r.tz, flow: r.flow, input: r.input, user: r.created_by, role: r.created_role, createdAt: r.created_at, updatedAt: r.updated_at, overlap: r.overlap, catchUp: r.catch_up, paused: r.paused };
}

export type ScheduleView = ReturnType<typeof scheduleView>;

/** The schedule's view with its next tick (ISO time; null while paused). */
export type ScheduleListing = ScheduleView & { next: string | null };

export function scheduleListing(r: ScheduleRow): ScheduleListing {
  return { ...scheduleView(r), next: r.paused ? null : nextTick(r) };
}

function nextTick(r: ScheduleRow): string | null {
  try {
    return nextOccurrences(r.cron, r.tz, 1)[0]?.toISOString() ?? null;
  } catch {
    return null;
  }
}
