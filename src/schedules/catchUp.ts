/**
 * Catch-up of ticks missed while no daemon ran (`--catch-up latest|all`, docs/schedules.md).
 * pg-boss skips occurrences that fell while its cron pass did not run; every daemon, after each
 * sync with pg-boss, looks for occurrences of each catching-up schedule after the later of its
 * last handled tick and its last write, up to `missedAfterMs` ago (younger ones are pg-boss's to
 * send), and starts them through the same locked, ordered tick start as a job
 * (tickStart.ts), so nothing starts twice however many daemons do it at once.
 *
 * Bounded: it looks back at most CATCH_UP_LOOKBACK_MS and starts at most CATCH_UP_MAX ticks (the
 * latest) per schedule and pass.
 */
import type { PreviewSchedule } from './tickTime.js';

export const CATCH_UP_MAX = 100;
export const CATCH_UP_LOOKBACK_MS = 7 * 86_400_000;
/** A tick younger than this is not missed yet: pg-boss forwards an occurrence within about a minute. */
export const DEFAULT_MISSED_AFTER_MS = 2 * 60_000;

const PAGE = 50;

/** The missed occurrences to start, oldest first: after `since`, at or before `cutoff`; `latest` keeps only the last. Pure. */
export function missedTicks(preview: PreviewSchedule, s: { cron: string; tz: string; catch_up: 'latest' | 'all'; since: Date }, cutoff: Date): Date[] {
  const from = new Date(Math.max(s.since.getTime(), cutoff.getTime() - CATCH_UP_LOOKBACK_MS));
  if (from.getTime() >= cutoff.getTime()) return [];
  const keep = s.catch_up === 'latest' ? 1 : CATCH_UP_MAX;
  const found: Date[] = [];
  let after = from;
  // The lookback bounds the pages: at most one occurrence a minute (pg-boss's resolution).
  for (let page = 0; page < Math.ceil(CATCH_UP_LOOKBACK_MS / 60_000 / PAGE) + 1; page++) {
    const list = preview(s.cron, { tz: s.tz, from: after, count: PAGE });
    let passed = false;
    for (const d of list) {
      if (d.getTime() > cutoff.getTime()) {
        passed = true;
        break;
      }
      if (d.getTime() <= s.since.getTime()) continue;
      found.push(d);
      if (found.length > keep) found.shift();
    }
    if (passed || list.length < PAGE) break;
    after = list[list.length - 1]!;
  }
  return found;
}
