/**
 * NOTIFY. (The executors' locks are rows of executor_leases, never advisory locks: leases.ts.)
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import { payloadsParam, type Queryable } from './common.js';

export async function notifyEvents(db: Queryable, channel: string, payloads: string[]): Promise<void> {
  if (payloads.length === 0) return;
  await db.query({
    name: 'stepd_notify_events',
    // One JSON array, not a text[]: the driver escapes every quote of a text[] element in
    // JavaScript, and event payloads are JSON, full of quotes.
    text: `SELECT pg_notify($1, p::text) FROM json_array_elements($2::json) AS p`,
    values: [channel, payloadsParam(payloads)],
  });
}


/** Tells every executor on this schema that steps became ready (the trigger is quiet for executors). */
export async function notifyStepsReady(db: Queryable, schema: string): Promise<void> {
  await db.query({
    name: 'stepd_notify_steps_ready',
    text: `SELECT pg_notify('stepd_wakeup', json_build_object('schema', $1::text, 'table', 'workflow_steps', 'id', 0, 'status', 'ready')::text)`,
    values: [schema],
  });
}
