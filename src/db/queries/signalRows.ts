/**
 * Rows of the `signals` table (sql/0024): what a service sends, in its own transaction. The
 * database stamps id, created_at and created_role; the insert names only (name, key, payload),
 * the columns a client role may write. (The NOTIFY helpers are in signals.ts: another concept.)
 */
import { type Queryable } from './common.js';

export interface SignalRow {
  id: string;
  name: string;
  key: string | null;
  payload: Record<string, unknown>;
  created_at: Date;
  created_role: string;
}

export interface NewSignal {
  name: string;
  key?: string | null;
  payload?: Record<string, unknown>;
}

/**
 * Inserts one signal as the session's role (the matching waits are readied by the database in
 * this statement's transaction, sql/0025). Refused by SQL: a bad name or key (23514), a payload
 * that is not an object (23514) or above caps.inputBytes (54000), a role without the grant (42501).
 */
export async function insertSignal(db: Queryable, signal: NewSignal): Promise<SignalRow> {
  const { rows } = await db.query<SignalRow>({
    name: 'stepd_insert_signal',
    text: `INSERT INTO signals (name, key, payload) VALUES ($1, $2, coalesce($3::jsonb, '{}'::jsonb))
           RETURNING id::text, name, key, payload, created_at, created_role`,
    values: [signal.name, signal.key ?? null, signal.payload === undefined ? null : JSON.stringify(signal.payload)],
  });
  return rows[0]!;
}
