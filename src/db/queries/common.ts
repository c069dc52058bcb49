/**
 * Shared pieces of the statement catalogue. Connections have search_path set to the stepd
 * schema (see connect.ts), so statements use unqualified table names and are prepared once per
 * connection (`name`). Values are always parameters; nothing builds SQL from input.
 */
import type { ErrorData } from '../../errors.js';
import { storableError } from '../../storedError.js';

export interface Queryable {
  query<R = any>(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Events a statement NOTIFYs itself, in order, on `channel` (each payload one event's JSON): a round trip saved. */
export interface EventsNotify {
  channel: string;
  payloads: string[];
}

/**
 * Event payloads as one JSON array for a `json` parameter, read back with `json_array_elements`
 * (whose elements keep their text as sent): each payload is already JSON text (eventPayload), so
 * joining them costs no second JSON.stringify that escapes every quote, and PostgreSQL no
 * unescaping.
 */
export function payloadsParam(payloads: readonly string[] | undefined): string {
  return payloads && payloads.length > 0 ? `[${payloads.join(',')}]` : '[]';
}

/** JSON for a jsonb parameter: undefined → SQL NULL, anything else (even null) → its JSON text. */
export function jsonParam(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}


/** An error for a jsonb `error` column: its text cut to the documented size (storedError.ts); null stays SQL NULL. */
export function errorParam(error: ErrorData | null | undefined): string | null {
  return error === undefined || error === null ? null : JSON.stringify(storableError(error));
}
