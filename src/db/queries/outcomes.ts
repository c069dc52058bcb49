/**
 * Recording step outcomes, each guarded by the state it expects: the batch's statement (lock the
 * workflows, finish the steps this executor is running), the watchdog's (an expired lease, an
 * expired gate).
 * Part of the runtime statement catalogue (src/db/queries.ts re-exports every module).
 */
import type { ErrorData } from '../../errors.js';
import type { StepStatus } from '../tables.js';
import { storableError } from '../../storedError.js';
import { jsonParam, type Queryable } from './common.js';
import { STEP_EXECUTOR_ALIVE } from './executors.js';
import type { LockedWorkflow } from './workflows.js';

/** What a batch needs of each workflow row it locked. */
export type LockedWorkflowState = Pick<LockedWorkflow, 'id' | 'status' | 'step_count'>;

export interface FinishedStep {
  id: string;
  workflow_id: string;
  name: string;
  attempt: number;
  fanout_id: string | null;
  item_index: number | null;
  args: unknown;
  result: unknown;
  first_attempt_id: string | null;
}

const FINISH_SET = `status = $2, result = CASE WHEN $2 = 'done' THEN $3::jsonb ELSE result END,
                    error = $4::jsonb, args = coalesce($5::jsonb, args), completed_at = now(),
                    started_at = coalesce(started_at, now()), lease_until = NULL`;
const FINISH_RETURNING = `RETURNING id, workflow_id, name, attempt, fanout_id, item_index, args, result, first_attempt_id`;

export interface FinishValues {
  id: string;
  status: Extract<StepStatus, 'done' | 'failed'>;
  result?: unknown;
  error?: ErrorData;
  args?: unknown;
  /** What the attempt spent (src/usage/stepUsage.ts); sql/0030 adds it to the workflow's usage. */
  usage?: unknown;
  /** A readied signal wait, recorded straight from `ready` (not claimed): fenced by that status, its result kept. */
  signalled?: boolean;
}

/**
 * The fence of a batch's step (alias `s`, its values `u`): running under this executor ($1), or
 * for a readied signal wait, still ready (whoever records it first wins, executors alike).
 */
const BATCH_FENCE = `CASE WHEN u.signalled THEN s.status = 'ready' AND s.tool IS NULL AND s.args -> 'signal' IS NOT NULL
                                ELSE s.status = 'running' AND s.executor_id = $1 END`;

function finishValues(v: FinishValues): unknown[] {
  return [v.id, v.status, jsonParam(v.result ?? null), jsonParam(v.error), jsonParam(v.args)];
}

/**
 * For the rest of this transaction, a lock not granted within `ms` fails the statement (55P03)
 * instead of waiting: for transactions that must not wait on a row someone else holds.
 */
export async function limitLockWaitsInTransaction(db: Queryable, ms: number): Promise<void> {
  await db.query({
    name: 'stepd_limit_lock_waits_in_transaction',
    text: `SELECT set_config('lock_timeout', $1, true)`,
    values: [`${Math.max(1, Math.round(ms))}ms`],
  });
}

/**
 * The watchdog's finish: only a running step whose lease has run out and whose executor is not
 * alive to answer for it (STEP_EXECUTOR_ALIVE: a live executor rescues its own steps, and keeps
 * those whose outcome it holds).
 */
export async function finishStepIfLeaseExpiredAndExecutorGone(db: Queryable, v: FinishValues): Promise<FinishedStep | undefined> {
  const { rows } = await db.query<FinishedStep>({
    name: 'stepd_finish_step_if_lease_expired_and_executor_gone',
    text: `UPDATE workflow_steps s SET updated_at = now(), ${FINISH_SET}
            WHERE s.id = $1 AND s.status = 'running' AND s.lease_until < now() AND NOT ${STEP_EXECUTOR_ALIVE} ${FINISH_RETURNING}`,
    values: finishValues(v),
  });
  return rows[0];
}

/** A gate's deadline passed: only a gate still pending past its expiry. */
export async function finishGateIfExpired(db: Queryable, v: FinishValues): Promise<FinishedStep | undefined> {
  const { rows } = await db.query<FinishedStep>({
    name: 'stepd_finish_gate_if_expired',
    text: `UPDATE workflow_steps SET updated_at = now(), ${FINISH_SET}
            WHERE id = $1 AND status = 'pending' AND expires_at < now() ${FINISH_RETURNING}`,
    values: finishValues(v),
  });
  return rows[0];
}

/**
 * The start of a batch of outcomes, in one statement: lock the workflow rows (in id order), then
 * finish the given steps this executor is running, of those workflows that are still running.
 * With `skipLocked`, workflows another transaction holds are left out (not returned, their steps
 * not finished) instead of waited for. With `skipHeldSteps` as well, step rows another
 * transaction holds are left out too and come back in `held` (running under this executor, to be
 * recorded later): a batch that met a held step row is redone this way (it costs a lock and a
 * read per step, so the first try does without). Only each workflow's id, status and step count come back
 * (its name, input and flow are in the executor's cache: a fan-out's input can be large). The locked ids are a filter (an array), not a join: a
 * generic plan joined them to the unnest in a nested loop, quadratic in the batch size.
 */
export async function lockWorkflowsAndFinishSteps(
  db: Queryable,
  executorId: string,
  workflowIds: string[],
  values: FinishValues[],
  opts: { skipLocked?: boolean; skipHeldSteps?: boolean } = {},
): Promise<{ workflows: LockedWorkflowState[]; finished: FinishedStep[]; held: string[] }> {
  const skipHeld = opts.skipLocked === true && opts.skipHeldSteps === true;
  const { rows } = await db.query<{ workflows: LockedWorkflowState[]; finished: FinishedStep[]; held: string[] | null }>({
    name: skipHeld
      ? 'stepd_lock_workflows_and_finish_steps_skip_locked_and_held'
      : opts.skipLocked
        ? 'stepd_lock_workflows_and_finish_steps_skip_locked'
        : 'stepd_lock_workflows_and_finish_steps',
    text: `WITH locked AS (
             SELECT id, status, step_count FROM workflows
              WHERE id = ANY($2::bigint[]) ORDER BY id ${opts.skipLocked ? 'FOR UPDATE SKIP LOCKED' : 'FOR UPDATE'}),
           ${skipHeld ? HELD_STEPS_CTES : ''}
           fin AS (
             UPDATE workflow_steps s
                SET updated_at = now(), status = u.status, result = CASE WHEN u.status = 'done' AND NOT u.signalled THEN u.result ELSE s.result END,
                    error = u.error, args = coalesce(u.args, s.args), completed_at = now(),
                    started_at = coalesce(s.started_at, now()), lease_until = NULL, usage = coalesce(u.usage, s.usage),
                    executor_id = CASE WHEN u.signalled THEN $1 ELSE s.executor_id END
               FROM (SELECT (e.v ->> 'id')::bigint AS id, e.v ->> 'status' AS status, e.v -> 'result' AS result,
                            e.v -> 'error' AS error, e.v -> 'args' AS args, nullif(e.v -> 'usage', 'null'::jsonb) AS usage,
                            coalesce((e.v ->> 'signalled')::boolean, false) AS signalled
                       FROM jsonb_array_elements($3::jsonb) AS e(v)) u
              WHERE s.id = u.id AND ${BATCH_FENCE}
                AND s.workflow_id = ANY (ARRAY(SELECT id FROM locked WHERE status = 'running'))
                ${skipHeld ? 'AND s.id IN (SELECT id FROM free)' : ''}
          RETURNING s.id::text AS id, s.workflow_id::text AS workflow_id, s.name, s.attempt, s.fanout_id::text AS fanout_id,
                    s.item_index, s.args, s.result, s.first_attempt_id::text AS first_attempt_id)
           SELECT (SELECT coalesce(json_agg(json_build_object(
                     'id', l.id::text, 'status', l.status, 'step_count', l.step_count)), '[]') FROM locked l) AS workflows,
                  (SELECT coalesce(json_agg(f), '[]') FROM fin f) AS finished,
                  ${skipHeld ? `(SELECT json_agg(o.id::text) FROM ours o WHERE o.id NOT IN (SELECT id FROM free))` : 'NULL::json'} AS held`,
    // The outcomes as one JSON array (see insertSteps); a done step's result is JSON null at least.
    values: [
      executorId,
      workflowIds,
      JSON.stringify(values.map((v) => ({ id: v.id, status: v.status, result: v.result ?? null, error: v.error && storableError(v.error), args: v.args, usage: v.usage, signalled: v.signalled }))),
    ],
  });
  const row = rows[0];
  return row ? { workflows: row.workflows, finished: row.finished, held: row.held ?? [] } : { workflows: [], finished: [], held: [] };
}

/**
 * The steps of the batch running under this executor in the locked running workflows (`ours`),
 * and those of them whose row nobody else holds, locked now (`free`). A client's FOR KEY SHARE
 * does not conflict with FOR NO KEY UPDATE (nor with the UPDATE after it), so it holds nothing back.
 */
const HELD_STEPS_CTES = `ours AS (
             SELECT s.id FROM workflow_steps s
               JOIN (SELECT (e.v ->> 'id')::bigint AS id, coalesce((e.v ->> 'signalled')::boolean, false) AS signalled
                       FROM jsonb_array_elements($3::jsonb) AS e(v)) u ON u.id = s.id
              WHERE ${BATCH_FENCE}
                AND s.workflow_id = ANY (ARRAY(SELECT id FROM locked WHERE status = 'running'))),
           free AS (
             SELECT s.id FROM workflow_steps s WHERE s.id IN (SELECT id FROM ours) FOR NO KEY UPDATE SKIP LOCKED),`;
