/**
 * A fork instance's state for its completion policy (DESIGN §2d): whether its join is still to
 * come, and how its branches stand (the last row of each, read through the fan-out index).
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ErrorData } from '../../errors.js';
import { errorParam, type Queryable } from './common.js';

export interface ForkState {
  /** Its join is still to come (false once it joined, failed or never fanned out). */
  open: boolean;
  /** A fork without a tool: how many branches it started with (`result.branches`), else null. */
  held: number | null;
  /** Branches (items) started so far. */
  started: number;
  /** One past the highest item index started (a forEach's next item). */
  next: number;
  /** Branches whose chain ended with a result (last row done, no fan-out of its own open). */
  completed: number;
  /** Branches that ended any way: done, failed or cancelled, with no fan-out open. */
  finished: number;
}

export async function getForkState(db: Queryable, forkId: string): Promise<ForkState> {
  const { rows } = await db.query<ForkState>({
    name: 'stepd_get_fork_state',
    text: `WITH last AS (SELECT DISTINCT ON (item_index) item_index, status, fanout_open FROM workflow_steps
                          WHERE fanout_id = $1 ORDER BY item_index, id DESC)
           SELECT f.fanout_open AS open,
                  CASE WHEN jsonb_typeof(f.result -> 'branches') = 'array' THEN jsonb_array_length(f.result -> 'branches') END AS held,
                  (SELECT count(*) FROM last)::int AS started,
                  coalesce((SELECT max(item_index) FROM last) + 1, 0)::int AS next,
                  (SELECT count(*) FROM last WHERE status = 'done' AND NOT fanout_open)::int AS completed,
                  (SELECT count(*) FROM last WHERE status IN ('done', 'failed', 'cancelled') AND NOT fanout_open)::int AS finished
             FROM workflow_steps f WHERE f.id = $1`,
    values: [forkId],
  });
  return rows[0] ?? { open: false, held: null, started: 0, next: 0, completed: 0, finished: 0 };
}

/**
 * The latest done row of the chain at a position (a branch's item, or the top level when
 * `fanoutId` is null): the predecessor of a step about to be created there.
 */
export async function getLatestDoneRowInChain(
  db: Queryable,
  v: { workflowId: string; fanoutId: string | null; itemIndex: number | null },
): Promise<{ id: string; name: string; result: unknown } | undefined> {
  const { rows } = await db.query<{ id: string; name: string; result: unknown }>({
    name: 'stepd_get_latest_done_row_in_chain',
    text: `SELECT id, name, result FROM workflow_steps
            WHERE workflow_id = $1 AND fanout_id IS NOT DISTINCT FROM $2 AND item_index IS NOT DISTINCT FROM $3 AND status = 'done'
            ORDER BY id DESC LIMIT 1`,
    values: [v.workflowId, v.fanoutId, v.itemIndex],
  });
  return rows[0];
}

/** The latest row at the top level of a workflow (outside every fan-out), with its status. */
export async function getLatestTopLevelRow(db: Queryable, workflowId: string): Promise<{ id: string; name: string; status: string; result: unknown } | undefined> {
  const { rows } = await db.query<{ id: string; name: string; status: string; result: unknown }>({
    name: 'stepd_get_latest_top_level_row',
    text: `SELECT id, name, status, result FROM workflow_steps WHERE workflow_id = $1 AND fanout_id IS NULL ORDER BY id DESC LIMIT 1`,
    values: [workflowId],
  });
  return rows[0];
}

/**
 * A step that succeeded but whose transition failed inside a fan-out (no branch matched, items
 * not a list): its row, still done, takes the error, so the join (allSettled) sees the branch failed.
 */
export async function failDoneStepForTransition(db: Queryable, stepId: string, error: ErrorData): Promise<void> {
  await db.query({
    name: 'stepd_fail_done_step_for_transition',
    text: `UPDATE workflow_steps SET updated_at = now(), status = 'failed', error = $2::jsonb, fanout_open = false WHERE id = $1 AND status = 'done'`,
    values: [stepId, errorParam(error)],
  });
}
