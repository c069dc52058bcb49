/**
 * Signal matches deferred past a held wait row (sql/0042). A signal's trigger never waits for a
 * wait row another transaction holds (a client may hold any step row FOR UPDATE): it records the
 * (workflow, signal) pair instead, and the watchdog's leader completes it here once the row is free.
 */
import { type Queryable } from './common.js';

/**
 * Readies, for up to `limit` deferred matches, the workflow's first pending wait that matches the
 * signal — only while the workflow runs and has not consumed that signal, the wait's `since` at
 * or before the signal — and drops the matches that no longer apply. A wait whose row is still
 * held keeps its match for the next sweep; matches another executor is completing are skipped.
 * Returns how many waits it readied (the caller wakes the executors).
 */
export async function readyDeferredSignalMatchesOfRunningWorkflows(db: Queryable, limit: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'stepd_ready_deferred_signal_matches_of_running_workflows',
    text: 'SELECT stepd_ready_deferred_matches_of_running_workflows($1) AS n',
    values: [limit],
  });
  return rows[0]?.n ?? 0;
}
