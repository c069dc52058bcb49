/**
 * Whether any executor is alive on the schema, as a client asks it (`stepd run --follow`,
 * `stepd watch`): an executor beat within the dead-after it declared. Clients may read only the
 * liveness columns of `executors` (id, last_beat_at, dead_after_ms; never host or pid).
 */
import { type Queryable } from './common.js';

export interface ExecutorLiveness {
  /** Executors that beat within their dead-after. */
  alive: number;
  /** The most recent beat of any executor, alive or not; null when none ever registered (or all stopped cleanly). */
  lastBeatAt: Date | null;
}

/** Counts the executors whose last beat is within their declared dead-after. Read-only. */
export async function readExecutorLivenessByBeat(db: Queryable): Promise<ExecutorLiveness> {
  const { rows } = await db.query<{ alive: number; last_beat_at: Date | null }>({
    name: 'stepd_read_executor_liveness_by_beat',
    text: `SELECT count(*) FILTER (WHERE last_beat_at >= now() - dead_after_ms * interval '1 millisecond')::int AS alive,
                  max(last_beat_at) AS last_beat_at
             FROM executors`,
  });
  return { alive: rows[0]?.alive ?? 0, lastBeatAt: rows[0]?.last_beat_at ?? null };
}
