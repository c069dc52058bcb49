/**
 * Statements on signal triggers (sql/0026_triggers.sql): which signal starts which registered
 * flow, with which input template, as whom. The workflows themselves are inserted by the
 * database, in the signal's own transaction; nothing here starts one.
 */
import { jsonParam, type Queryable } from './common.js';

export interface TriggerRow {
  name: string;
  signal: string;
  flow: string;
  /** The input template (default "{{signal.payload}}"). */
  input: unknown;
  run_as: string | null;
  /** session_user of the insert or last update (stamped by the database): the role that answers for what it starts. */
  created_role: string | null;
  /** The role that added it: only it (a member, or a trusted role) may change or remove it. */
  owner_role: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface NewTrigger {
  name: string;
  signal: string;
  flow: string;
  /** undefined: the default template, "{{signal.payload}}". */
  input?: unknown;
  runAs: string | null;
}

const COLUMNS = 'name, signal, flow, input, run_as, created_role, owner_role, created_at, updated_at';

/**
 * Adds the trigger, or replaces the one of that name (`created` tells which). The database
 * refuses another role's trigger (42501), an unregistered flow and a bad template (23514).
 */
export async function upsertTrigger(db: Queryable, g: NewTrigger): Promise<TriggerRow & { created: boolean }> {
  const { rows } = await db.query<TriggerRow & { created: boolean }>({
    text: `INSERT INTO triggers (name, signal, flow, input, run_as)
           VALUES ($1, $2, $3, coalesce($4::jsonb, '"{{signal.payload}}"'::jsonb), $5)
           ON CONFLICT (name) DO UPDATE SET signal = EXCLUDED.signal, flow = EXCLUDED.flow,
                                            input = EXCLUDED.input, run_as = EXCLUDED.run_as
           RETURNING ${COLUMNS}, (xmax = 0) AS created`,
    values: [g.name, g.signal, g.flow, jsonParam(g.input), g.runAs],
  });
  return rows[0]!;
}

export async function listTriggers(db: Queryable): Promise<TriggerRow[]> {
  const { rows } = await db.query<TriggerRow>({ text: `SELECT ${COLUMNS} FROM triggers ORDER BY name` });
  return rows;
}

/**
 * Removes the trigger through remove_trigger (sql/0026: clients hold no DELETE on the table),
 * which refuses another role's trigger (42501) unless the caller is trusted; `undefined` when
 * there was none of that name.
 */
export async function deleteOwnTrigger(db: Queryable, name: string): Promise<TriggerRow | undefined> {
  const { rows } = await db.query<TriggerRow>({ text: `SELECT ${COLUMNS} FROM remove_trigger($1)`, values: [name] });
  return rows[0];
}
