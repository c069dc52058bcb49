/**
 * Whether a failed contract call may be tried again: the connection or the server went away
 * (a restart, a pooler without a server), or the database asked for a retry. Anything else with
 * an SQLSTATE is the database's answer (a stale token, a bad argument) and final. Pure.
 */
import { isConnectionError } from '../db/connectionErrors.js';

/** SQLSTATEs that ask for another try: serialization, deadlock, too many connections, lock or statement timeout. */
const RETRY_CODES = new Set(['40001', '40P01', '53300', '53400', '55P03', '57014']);

export function isTransient(err: unknown): boolean {
  if (isConnectionError(err)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  // An error with no SQLSTATE never came from the database: the driver or the socket failed.
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return RETRY_CODES.has(code);
}
