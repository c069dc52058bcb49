/**
 * Signal matches deferred past a held wait row (sql/0042): a signal's trigger never waits for a
 * wait row another transaction holds (a client's FOR UPDATE, a concurrent signal racing for the
 * same workflow, a cancellation); it records the match, and an executor completes it here once the
 * row is free. The watchdog's leader does so at every sweep; an executor that hears a signal
 * defer a match (sql/0043) tries within milliseconds (DeferredSignalRetry), since most rows are
 * held only for a moment.
 */
import type pg from 'pg';
import { notifyStepsReady, readyDeferredSignalMatchesOfRunningWorkflows } from '../../db/queries.js';
import { isLockNotAvailable, isTransactionConflict } from '../../errors.js';
import type { Logger } from '../../logger.js';

export interface DeferredSignalDeps {
  pool: pg.Pool;
  schema: string;
  log: Logger;
}

/**
 * Readies the deferred matches whose rows are free now (up to `batch`) and wakes the executors;
 * a conflict with another transaction leaves them for the next try. Returns how many it readied.
 */
export async function readyDeferredSignalMatches(deps: DeferredSignalDeps, batch: number): Promise<number> {
  let readied: number;
  try {
    readied = await readyDeferredSignalMatchesOfRunningWorkflows(deps.pool, batch);
  } catch (err) {
    if (!isLockNotAvailable(err) && !isTransactionConflict(err)) throw err;
    deps.log.warn({ err }, 'deferred signal matches met another transaction; trying again later');
    return 0;
  }
  if (readied > 0) {
    await notifyStepsReady(deps.pool, deps.schema);
    deps.log.info({ count: readied }, 'readied signal waits whose rows were held when their signal came');
  }
  return readied;
}
