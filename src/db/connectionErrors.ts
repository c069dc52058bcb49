/**
 * Errors that mean the database went away (not a bad statement). A light module: the CLI's error
 * wording imports it without loading pg or kysely.
 */

/** SQLSTATE classes and socket errors that mean the connection (or the server) went away. */
const CONNECTION_CODES = new Set(['57P01', '57P02', '57P03', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
const CONNECTION_MESSAGES = /Connection terminated|connection timeout|not queryable|Client was closed|terminating connection|the database system is (starting up|shutting down|in recovery mode)/i;

/** Whether `err` means the database could not be reached or the connection was lost (not a bad statement). */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof ConnectionLostError) return true;
  if (err instanceof AggregateError && err.errors.some(isConnectionError)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08'))) return true;
  return err instanceof Error && CONNECTION_MESSAGES.test(err.message);
}

/**
 * The connection under a statement or transaction was lost. Retryable: nothing of an
 * uncommitted transaction was kept; a COMMIT whose answer was lost may or may not have been
 * applied, so whatever is retried must be fenced by the state it expects (it is).
 * `code` is SQLSTATE 08006 (connection_failure) so generic retry checks recognise it.
 */
export class ConnectionLostError extends Error {
  readonly code = '08006';
  readonly retryable = true;
  constructor(cause: unknown) {
    super(`lost the connection to PostgreSQL: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ConnectionLostError';
  }
}
