/**
 * Delayed starts (`workflows.start_at`, `stepd run --at`): a new workflow is admitted no earlier
 * than its start_at (see admitNewWorkflows). The executor sets an alarm for the earliest one
 * instead of polling fast.
 */
import type { Queryable } from './common.js';

/** Milliseconds until the earliest start_at of a new workflow still in the future; undefined when none. */
export async function nextStartAtInMs(db: Queryable): Promise<number | undefined> {
  const { rows } = await db.query<{ ms: number | null }>({
    name: 'stepd_next_start_at_in_ms',
    // Served by the partial index workflows_start_at_idx (status = 'new' AND start_at IS NOT NULL).
    text: `SELECT (extract(epoch FROM min(start_at) - now()) * 1000)::float8 AS ms
             FROM workflows WHERE status = 'new' AND start_at IS NOT NULL AND start_at > now()`,
  });
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Math.max(0, Math.ceil(ms));
}
