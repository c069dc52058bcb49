/**
 * Fan-out bookkeeping: fork rows, live branches, outcomes for joins, cancelling.
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ErrorData } from '../../errors.js';
import type { StepRow, StepStatus } from '../tables.js';
import { errorParam, type Queryable } from './common.js';

export type ForkRow = Pick<StepRow, 'id' | 'name' | 'fanout_id' | 'item_index'> & {
  /** How many items a fork without a tool stored (its result's `items`), else null. */
  item_count: number | null;
};

/**
 * A fork row and every fork row enclosing it, innermost first, in one statement: the fan-out
 * rows above a branch, however deep, cost one round trip (each fanout_id points to an older row).
 */
export async function getForkRowAndAncestors(db: Queryable, stepId: string): Promise<ForkRow[]> {
  const { rows } = await db.query<ForkRow>({
    name: 'stepd_get_fork_row_and_ancestors',
    text: `WITH RECURSIVE up AS (
             SELECT id, name, fanout_id, item_index, result, 0 AS depth FROM workflow_steps WHERE id = $1
             UNION ALL
             SELECT s.id, s.name, s.fanout_id, s.item_index, s.result, up.depth + 1
               FROM workflow_steps s JOIN up ON s.id = up.fanout_id AND s.id < up.id)
           SELECT id, name, fanout_id, item_index,
                  CASE WHEN jsonb_typeof(result -> 'items') = 'array' THEN jsonb_array_length(result -> 'items') END AS item_count
             FROM up ORDER BY depth`,
    values: [stepId],
  });
  return rows;
}

/** One item a fork without a tool stored: `result.items[index]` (undefined when absent). */
export async function getForkItem(db: Queryable, forkId: string, index: number): Promise<{ found: boolean; item: unknown }> {
  const { rows } = await db.query<{ item: unknown }>({
    name: 'stepd_get_fork_item',
    text: `SELECT result -> 'items' -> $2::int AS item FROM workflow_steps WHERE id = $1 AND jsonb_array_length(result -> 'items') > $2::int`,
    values: [forkId, index],
  });
  return rows.length > 0 ? { found: true, item: rows[0]!.item } : { found: false, item: undefined };
}

/** Items `from` … `from + count - 1` a fork without a tool stored (`result.items`), in one read. */
export async function getForkItems(db: Queryable, forkId: string, from: number, count: number): Promise<unknown[]> {
  const { rows } = await db.query<{ items: unknown[] | null }>({
    name: 'stepd_get_fork_items',
    text: `SELECT (SELECT jsonb_agg(e.v ORDER BY e.i) FROM jsonb_array_elements(result -> 'items') WITH ORDINALITY AS e(v, i)
                    WHERE e.i > $2::int AND e.i <= $2::int + $3::int) AS items
             FROM workflow_steps WHERE id = $1`,
    values: [forkId, from, count],
  });
  return rows[0]?.items ?? [];
}

export async function getStepResult(db: Queryable, stepId: string): Promise<unknown> {
  const { rows } = await db.query<{ result: unknown }>({
    name: 'stepd_get_step_result',
    text: `SELECT result FROM workflow_steps WHERE id = $1`,
    values: [stepId],
  });
  return rows[0]?.result ?? null;
}

/** Marks a row as having fanned out (its fan-out is in progress) or as settled. */
export async function setFanoutOpen(db: Queryable, stepId: string, open: boolean): Promise<void> {
  await db.query({
    name: 'stepd_set_fanout_open',
    text: `UPDATE workflow_steps SET updated_at = now(), fanout_open = $2 WHERE id = $1 AND fanout_open IS DISTINCT FROM $2`,
    values: [stepId, open],
  });
}

/**
 * Whether any branch of a fan-out instance is still in progress, and how many items have been
 * started. A nested fork row is `done` as soon as it fans out, so its own unsettled fan-out
 * (fanout_open) holds the enclosing join back too. Both read O(1) index entries.
 */
export async function getFanoutProgress(db: Queryable, forkId: string): Promise<{ live: number; started: number }> {
  const { rows } = await db.query<{ live: number; started: number }>({
    name: 'stepd_get_fanout_progress',
    text: `SELECT (SELECT count(*) FROM (SELECT 1 FROM workflow_steps
                                         WHERE fanout_id = $1 AND (status IN ('pending', 'ready', 'running') OR fanout_open)
                                         LIMIT 1) x)::int AS live,
                  coalesce((SELECT max(item_index) FROM workflow_steps WHERE fanout_id = $1) + 1, 0)::int AS started`,
    values: [forkId],
  });
  return rows[0] ?? { live: 0, started: 0 };
}

export interface FanoutOutcome {
  id: string;
  name: string;
  /** The fork row whose fan-out this row belongs to. */
  fanout_id: string;
  item_index: number;
  status: StepStatus;
  result: unknown;
  error: ErrorData | null;
  /** For a fork row: how many items it stored (see ForkRow). */
  item_count: number | null;
  /** Its own fan-out has not settled (a branch still live when an enclosing fork joined early). */
  fanout_open: boolean;
}

/**
 * The last row of each branch (item) of a fan-out instance — and, below each of those that is a
 * done fork named in `descendInto` (a nested fork without a join, whose value is its own
 * fan-out's results), the last rows of its branches, at any depth — in one statement. Forks in
 * `skip` are not descended into (their results are already known). The result of a done row
 * named in `descendInto` is not returned (its value comes from below), only its item count.
 */
export async function getFanoutOutcomeTree(db: Queryable, forkId: string, descendInto: string[], skip: string[]): Promise<FanoutOutcome[]> {
  const { rows } = await db.query<FanoutOutcome>({
    name: 'stepd_get_fanout_outcome_tree',
    text: `WITH RECURSIVE outcome AS (
             SELECT o.* FROM (SELECT DISTINCT ON (item_index) id, name, fanout_id, item_index, status FROM workflow_steps
                               WHERE fanout_id = $1 ORDER BY item_index, id DESC) o
             UNION ALL
             SELECT c.* FROM outcome p CROSS JOIN LATERAL (
                      SELECT DISTINCT ON (item_index) id, name, fanout_id, item_index, status FROM workflow_steps
                       WHERE fanout_id = p.id ORDER BY item_index, id DESC) c
              WHERE p.status = 'done' AND p.name = ANY($2::text[]) AND NOT (p.id = ANY($3::bigint[])))
           SELECT o.id, o.name, o.fanout_id, o.item_index, o.status, s.error, s.fanout_open,
                  CASE WHEN o.status = 'done' AND o.name = ANY($2::text[]) THEN NULL ELSE s.result END AS result,
                  CASE WHEN o.name = ANY($2::text[]) AND jsonb_typeof(s.result -> 'items') = 'array'
                       THEN jsonb_array_length(s.result -> 'items') END AS item_count
             FROM outcome o JOIN workflow_steps s ON s.id = o.id
            ORDER BY o.fanout_id, o.item_index`,
    values: [forkId, descendInto, skip],
  });
  return rows;
}

/**
 * Cancels the live steps below a fork row (its branches and theirs, at any depth); returns the
 * ids of those that were running. `unapplied`: steps whose outcome this transaction recorded but
 * had not acted on yet; those below the fork are cancelled too (as they would have been had
 * their outcome come a moment later), and returned in `unapplied`.
 */
export async function cancelLiveStepsInFanout(db: Queryable, forkId: string, unapplied: string[] = []): Promise<{ running: string[]; unapplied: string[] }> {
  const { rows } = await db.query<{ id: string; was: string }>({
    name: 'stepd_cancel_live_steps_in_fanout',
    text: `WITH RECURSIVE tree AS (
             SELECT id, status FROM workflow_steps WHERE fanout_id = $1
             UNION ALL
             SELECT s.id, s.status FROM workflow_steps s JOIN tree ON s.fanout_id = tree.id),
           live AS (
             SELECT s.id, s.status FROM workflow_steps s JOIN tree ON tree.id = s.id
              WHERE s.status IN ('pending', 'ready', 'running')
                 OR (s.id = ANY($2::bigint[]) AND s.status IN ('done', 'failed')) FOR UPDATE OF s)
           UPDATE workflow_steps s SET updated_at = now(), status = 'cancelled', completed_at = greatest(now(), s.started_at), lease_until = NULL,
                  result = CASE WHEN live.status IN ('done', 'failed') THEN NULL ELSE s.result END,
                  error = CASE WHEN live.status IN ('done', 'failed') THEN NULL ELSE s.error END
             FROM live WHERE s.id = live.id
           RETURNING s.id::text AS id, live.status AS was`,
    values: [forkId, unapplied],
  });
  return {
    running: rows.filter((r) => r.was === 'running').map((r) => r.id),
    unapplied: rows.filter((r) => r.was === 'done' || r.was === 'failed').map((r) => r.id),
  };
}

/**
 * FailFast fan-outs failed: their fork rows (done when they fanned out) record the branch's
 * error, in one statement however many nested forks the failure went up through.
 */
export async function failForkRowsIfDone(db: Queryable, forkIds: string[], error: ErrorData): Promise<number> {
  const { rowCount } = await db.query({
    name: 'stepd_fail_fork_rows_if_done',
    text: `UPDATE workflow_steps SET updated_at = now(), status = 'failed', error = $2::jsonb, fanout_open = false
            WHERE id = ANY($1::bigint[]) AND status = 'done'`,
    values: [forkIds, errorParam(error)],
  });
  return rowCount ?? 0;
}
