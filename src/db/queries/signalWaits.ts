/**
 * Statements of a step that waits for a signal (sql/0025). The executor creates the pending row
 * (TxWriter.insertNow), then, in the same transaction: locks the wait's bucket
 * (`lockSignalWaitBucket`: a signal being inserted meanwhile has committed, or waits for this
 * transaction), then `completeSignalWaitIfSignalled` fills in `since` and readies the row at once
 * with the oldest matching signal the workflow has not consumed, recording the consumption.
 */
import { type Queryable } from './common.js';

/**
 * No claim takes a readied signal wait: the outcome lane records it straight from `ready`, in the
 * transaction that starts its next step (peekReadiedSignalWaits, signalPickup.ts). An older
 * executor that still claims one races the lane harmlessly: each is fenced by the row's status.
 */
export const NOT_SIGNALLED = `(tool IS NOT NULL OR args -> 'signal' IS NULL)`;
export const NOT_SIGNALLED_S = `(s.tool IS NOT NULL OR s.args -> 'signal' IS NULL)`;

/** What a waiting step's row records in `args.signal` (since filled in by the database). */
export interface SignalWaitArgs {
  names: string[];
  key: string | null;
  since: string | null;
}

/**
 * Locks the bucket a new wait may be matched in: its (name, key) bucket for each name, or its
 * name's when it has no key. Locked in order; an UPDATE (a new row version), so a client inserting
 * in REPEATABLE READ with an older snapshot gets 40001 rather than missing the wait.
 */
export async function lockSignalWaitBuckets(db: Queryable, names: string[], key: string | null): Promise<void> {
  await db.query({
    name: 'stepd_lock_signal_wait_buckets',
    text: `WITH b AS (
             SELECT l.bucket FROM signal_wait_locks l
              WHERE l.bucket IN (SELECT stepd_signal_bucket(n, $2) FROM unnest($1::text[]) AS n)
              ORDER BY l.bucket FOR NO KEY UPDATE)
           UPDATE signal_wait_locks l SET waits = l.waits + 1 FROM b WHERE l.bucket = b.bucket`,
    values: [names, key],
  });
}

export interface SignalWaitState {
  /** 'ready' when a signal was found and consumed at creation. */
  status: 'pending' | 'ready';
  since: string;
}

/**
 * A pending signal wait just created in this transaction: sets args.signal.since (the workflow's
 * created_at for `since: "workflow"`, the row's own for `"step"`), and when a signal matches
 * (name in names, key when the wait has one, created at or after since, not consumed by this
 * workflow), the oldest one becomes its result and the row is ready. Only a pending row changes.
 */
export async function completeSignalWaitIfSignalled(db: Queryable, stepId: string, since: 'workflow' | 'step'): Promise<SignalWaitState | undefined> {
  const { rows } = await db.query<SignalWaitState>({
    name: 'stepd_complete_signal_wait_if_signalled',
    text: `WITH st AS (
             SELECT s.id, s.workflow_id, s.args -> 'signal' AS w,
                    CASE WHEN $2 = 'step' THEN s.created_at ELSE wf.created_at END AS since
               FROM workflow_steps s JOIN workflows wf ON wf.id = s.workflow_id
              WHERE s.id = $1 AND s.status = 'pending' AND s.tool IS NULL
           ), found AS (
             SELECT g.id, g.name, g.key, g.payload, g.created_at, g.created_role
               FROM st, signals g
              WHERE g.name IN (SELECT jsonb_array_elements_text(st.w -> 'names'))
                AND (st.w ->> 'key' IS NULL OR g.key = st.w ->> 'key')
                AND g.created_at >= st.since
                AND NOT EXISTS (SELECT 1 FROM signal_consumptions c WHERE c.workflow_id = st.workflow_id AND c.signal_id = g.id)
              ORDER BY g.id LIMIT 1
           ), changed AS (
             UPDATE workflow_steps s
                SET args = jsonb_set(s.args, '{signal,since}', to_jsonb(st.since)),
                    status = CASE WHEN f.id IS NULL THEN 'pending' ELSE 'ready' END,
                    ready_at = CASE WHEN f.id IS NULL THEN NULL ELSE now() END,
                    readied_at = CASE WHEN f.id IS NULL THEN NULL ELSE now() END,
                    readied_role = f.created_role,
                    result = CASE WHEN f.id IS NULL THEN NULL
                                  ELSE jsonb_build_object('id', f.id::text, 'name', f.name, 'key', f.key, 'payload', f.payload,
                                                          'at', f.created_at, 'role', f.created_role) END
               FROM st LEFT JOIN found f ON true
              WHERE s.id = st.id
             RETURNING s.id, s.workflow_id, s.status, st.since, f.id AS signal_id
           ), consumed AS (
             INSERT INTO signal_consumptions (workflow_id, signal_id, step_id)
             SELECT c.workflow_id, c.signal_id, c.id FROM changed c WHERE c.signal_id IS NOT NULL
           )
           SELECT status, to_jsonb(since) #>> '{}' AS since FROM changed`,
    values: [stepId, since],
  });
  return rows[0];
}

/**
 * The signal a readied wait received (its row's result), for the retry of an attempt lost after
 * it was claimed: the signal stays consumed by that row, so the retry completes with it.
 */
export async function getReceivedSignal(db: Queryable, stepId: string): Promise<unknown> {
  const { rows } = await db.query<{ result: unknown }>({
    name: 'stepd_get_received_signal',
    text: `SELECT s.result FROM workflow_steps s JOIN signal_consumptions c ON c.step_id = s.id WHERE s.id = $1`,
    values: [stepId],
  });
  return rows[0]?.result ?? null;
}

/** A readied signal wait the outcome lane may record (signalPickup.ts). */
export interface ReadiedSignalWait {
  id: string;
  workflow_id: string;
  /** The step's name and attempt (its log line and trace span once recorded). */
  name: string;
  attempt: number;
  /** The matched signal (the row's result). */
  result: unknown;
  created_by: string | null;
  created_role: string | null;
}

/**
 * The oldest readied signal waits of running workflows, without locking them (those in
 * `excluding`, already on their way to the outcome lane, left out): no claim takes them
 * (NOT_SIGNALLED in claims.ts); the lane records each from `ready`, fenced by its status, in the
 * transaction that starts its next step. One probe of workflow_steps_ready_toolless_idx.
 */
export async function peekReadiedSignalWaits(db: Queryable, limit: number, excluding: string[]): Promise<ReadiedSignalWait[]> {
  const { rows } = await db.query<ReadiedSignalWait>({
    name: 'stepd_peek_readied_signal_waits',
    text: `SELECT s.id::text AS id, s.workflow_id::text AS workflow_id, s.name, s.attempt, s.result, w.created_by, w.created_role
             FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
            WHERE s.status = 'ready' AND s.tool IS NULL AND s.args -> 'signal' IS NOT NULL AND s.ready_at <= now()
              AND w.status = 'running' AND s.id <> ALL ($2::bigint[])
            ORDER BY s.ready_at, s.id LIMIT $1`,
    values: [limit, excluding],
  });
  return rows;
}
