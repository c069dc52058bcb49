/**
 * How the executor's loops log a failed iteration that they retry. A deadlock or serialization
 * failure with a client's transaction is part of sharing tables with clients — PostgreSQL chose a
 * victim, the loop tries again — so it is a warning naming the statement; anything else is an
 * error. (A lost connection is an outage, logged once by dbOutage.ts before this is asked.)
 */
import type { Logger } from '../logger.js';
import { isTransactionConflict, statementOf } from '../errors.js';

export function logRetriedFailure(log: Pick<Logger, 'warn' | 'error'>, err: unknown, message: string, fields: Record<string, unknown> = {}): void {
  if (isTransactionConflict(err)) {
    const code = (err as { code: string }).code;
    log.warn({ ...fields, err, code, statement: statementOf(err) ?? 'unknown' }, `${message} (${code === '40P01' ? 'deadlock' : 'serialization failure'} with another transaction)`);
    return;
  }
  log.error({ ...fields, err }, message);
}
