/**
 * Which tick a schedule's pg-boss job stands for. pg-boss forwards one job per occurrence but
 * tells the worker only the schedule's data; the job's `createdOn` (database time) is when it was
 * forwarded, within the minute after the occurrence. The tick is the latest occurrence of the
 * schedule's cron (in its time zone) at or before that moment, computed from stepd's own row,
 * so every executor, every retry and every duplicate of a job names the same tick, and a job
 * written into pg-boss's table by hand cannot invent a tick the cron does not have.
 * Pure: the occurrences come from pg-boss's `previewSchedule` (no database, no clock).
 */

/** pg-boss's previewSchedule: occurrences strictly after `from`, at most `count`. */
export type PreviewSchedule = (cron: string, options: { tz: string; from: Date; count: number }) => Date[];

/** Occurrences asked for at a time: small, since only those up to the job's time are wanted. */
const PAGE = 50;
/** How far back to look for the latest occurrence, widening only when nothing was found. */
const LOOKBACKS_MS = [61_000, 3_601_000, 86_401_000, 32 * 86_400_000, 367 * 86_400_000, 5 * 366 * 86_400_000];

export function latestOccurrenceAtOrBefore(preview: PreviewSchedule, cron: string, tz: string, at: Date): Date | undefined {
  const until = at.getTime();
  for (const back of LOOKBACKS_MS) {
    let from = new Date(until - back);
    let latest: Date | undefined;
    // Pages of occurrences until one passes `at` (an expression finer than a minute has many).
    for (let page = 0; page < 2_000; page++) {
      const list = preview(cron, { tz, from, count: PAGE });
      let passed = false;
      for (const d of list) {
        if (d.getTime() > until) {
          passed = true;
          break;
        }
        latest = d;
      }
      if (passed || list.length < PAGE) break;
      from = list[list.length - 1]!;
    }
    if (latest) return latest;
  }
  return undefined;
}

/** The workflow idempotency key of one tick: `schedule:NAME:<tick time, ISO 8601 UTC>`. */
export function tickKey(schedule: string, tick: Date): string {
  return `schedule:${schedule}:${tick.toISOString()}`;
}
