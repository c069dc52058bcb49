/**
 * One batch of outcomes, one transaction, set-based:
 *
 *   1. one statement locks the workflow rows (in id order; a shared batch skips those another
 *      transaction holds) and records every outcome whose step is still `running` under this
 *      executor (the fence) — however many of them belong to one workflow;
 *   2. per workflow, in id order, each recorded outcome is applied (the pure resolver decides,
 *      the shared TxWriter queues the next steps); arrivals at forks are only counted;
 *   3. per workflow, the arrivals are settled: one progress check per fork, the next `forEach`
 *      items, a join created exactly once when the last branch has settled (ForkSettlement);
 *   4. the writer's last statements: every new row in one INSERT, every ended workflow in one
 *      UPDATE, idle workflows completed in one, events in one NOTIFY.
 *
 * An outcome recorded in step 1 but not applied yet counts as live: a fork that fails or a
 * workflow that ends before it is applied cancels it (the row ends `cancelled`, as if its outcome
 * had come a moment later and been refused by the fence), and it is never applied.
 *
 * A shared batch waits for a lock at most SHARED_LOCK_WAIT_MS (outcomeLocks.ts): past it, it
 * fails with RowHeldElsewhere saying where (finishing the steps, one workflow's advance, the last
 * writes), and finishSteps redoes it without what met the lock.
 */
import {
  finishGateIfExpired,
  finishStepIfLeaseExpiredAndExecutorGone,
  lockWorkflowsAndFinishSteps,
  type FinishValues,
  type FinishedStep,
  type Queryable,
} from '../../db/queries.js';
import { isLockNotAvailable, type ErrorData } from '../../errors.js';
import { Advance } from '../transitions/advance.js';
import { HEAVY_OUTCOME_STATEMENTS, OutcomeBudget } from './outcomeBudget.js';
import { ALONE_LOCK_WAIT_MS, SHARED_LOCK_WAIT_MS } from './outcomeLocks.js';
import type pg from 'pg';
import type { ClaimOnCreate, TxWriter } from '../core/txWriter.js';
import type { FinishInput, TxDeps, TxResult } from '../core/txTypes.js';
import { emptyTxResult, inWriterTransaction } from '../core/writerTransaction.js';
import { RowHeldElsewhere, type OutcomeHeldStage } from '../core/rowHeldElsewhere.js';

export { ALONE_LOCK_WAIT_MS } from './outcomeLocks.js';

/** How a batch is recorded: `skipHeldSteps` redoes a shared batch that met a held step row (lockWorkflowsAndFinishSteps). */
export interface BatchOptions {
  skipHeldSteps?: boolean;
}

export function finishValues(input: FinishInput): FinishValues {
  const values: FinishValues =
    input.outcome.status === 'done'
      ? { id: input.stepId, status: 'done', result: input.outcome.result }
      : { id: input.stepId, status: 'failed', error: stripInternal(input.outcome.error) };
  if (input.args !== undefined) values.args = input.args;
  if (input.outcome.usage !== undefined) values.usage = input.outcome.usage;
  if (input.guard === 'signalled') values.signalled = true;
  return values;
}

function stripInternal(error: ErrorData & { retryAfterMs?: number }): ErrorData {
  const { retryAfterMs: _ignored, ...rest } = error;
  return rest;
}

/** Compares two ids (bigint as decimal text, no leading zeros) without parsing them. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** By workflow id, then step id: the order rows are locked and outcomes applied in. */
function byWorkflowThenStep(a: FinishInput, b: FinishInput): number {
  return compareIds(a.workflowId, b.workflowId) || compareIds(a.stepId, b.stepId);
}

/** Records a batch (one outcome per step) and advances its workflows, in one transaction. */
export async function recordOutcomeBatch(deps: TxDeps, inputs: FinishInput[], claim?: ClaimOnCreate, opts: BatchOptions = {}): Promise<TxResult> {
  // A shared batch skips workflows locked elsewhere, waits for other locks briefly, and gives each workflow a statement budget.
  const alone = inputs.every((i) => i.alone);
  const at: { where: OutcomeHeldStage } = { where: { stage: 'steps' } };
  try {
    return await inWriterTransaction(deps, claim, (client, w) => applyBatch(deps, client, w, inputs, { alone, skipHeldSteps: opts.skipHeldSteps === true, at }), {
      lockTimeoutMs: alone ? ALONE_LOCK_WAIT_MS : SHARED_LOCK_WAIT_MS,
    });
  } catch (err) {
    // The alone lane's lock waits go back to its queue as they are (OutcomeQueue).
    if (!alone && isLockNotAvailable(err)) throw new RowHeldElsewhere(at.where, SHARED_LOCK_WAIT_MS, err);
    throw err;
  }
}

/** The batch's statements, inside its transaction; `o.at` says where a lock wait would have met (RowHeldElsewhere). */
async function applyBatch(
  deps: TxDeps,
  client: pg.PoolClient,
  w: TxWriter,
  inputs: FinishInput[],
  o: { alone: boolean; skipHeldSteps: boolean; at: { where: OutcomeHeldStage } },
): Promise<TxResult> {
  const { alone } = o;
  const sorted = [...inputs].sort(byWorkflowThenStep);
  // Recorded by the batch's statement: the steps this executor ran, and readied signal waits.
  const running = sorted.filter((i) => i.guard === 'running' || i.guard === 'signalled');
  const workflowIds = [...new Set(sorted.map((i) => i.workflowId))];
  const {
    workflows: locked,
    finished: rows,
    held,
  } = await lockWorkflowsAndFinishSteps(client, deps.executorId, workflowIds, running.map(finishValues), {
    skipLocked: !alone,
    skipHeldSteps: o.skipHeldSteps,
  });
  // Workflows (or step rows) another transaction holds: recorded alone, once it lets go, without holding this batch.
  const lockedIds = new Set(locked.map((l) => l.id));
  const heldIds = new Set(held);
  const deferred = alone ? [] : sorted.filter((i) => !lockedIds.has(i.workflowId) || heldIds.has(i.stepId)).map((i) => ({ ...i, alone: true }));
  const runningIds = locked.filter((l) => l.status === 'running').map((l) => l.id).sort(compareIds);
  if (runningIds.length === 0) return deferred.length > 0 ? { ...emptyTxResult(), deferred } : emptyTxResult();
  for (const l of locked) w.setStepCount(l.id, l.step_count);
  const infos = await deps.cache.load(client, runningIds);
  const finished = new Map<string, FinishedStep>(rows.map((row) => [row.id, row]));
  const budget = alone ? undefined : new OutcomeBudget(client, HEAVY_OUTCOME_STATEMENTS);
  const db: Queryable = budget ?? client;
  const advances: Advance[] = [];
  const byWorkflow = new Map<string, FinishInput[]>();
  for (const i of sorted) {
    const list = byWorkflow.get(i.workflowId);
    if (list) list.push(i);
    else byWorkflow.set(i.workflowId, [i]);
  }
  for (const workflowId of runningIds) {
    const info = infos.get(workflowId);
    if (!info) continue;
    const mine = byWorkflow.get(workflowId) ?? [];
    const advance = new Advance(db, deps, info, w);
    advances.push(advance);
    advance.recorded(mine.filter((i) => finished.has(i.stepId)).map((i) => i.stepId));
    o.at.where = { stage: 'advance', workflowId };
    for (const i of mine) {
      // The watchdog's guards (a lease or a gate that expired) record one outcome at a time.
      if (i.guard === 'lease-expired' || i.guard === 'gate-expired') {
        const row = await (i.guard === 'lease-expired' ? finishStepIfLeaseExpiredAndExecutorGone : finishGateIfExpired)(client, finishValues(i));
        if (row) finished.set(row.id, row);
      }
      const row = finished.get(i.stepId);
      if (!row) continue;
      // Never claimed: it starts and ends in this transaction (no claim announced it).
      if (i.guard === 'signalled') advance.event('step.started', { stepId: row.id, step: row.name.slice(0, 200), attempt: row.attempt, ...(row.item_index !== null ? { itemIndex: row.item_index } : {}) });
      budget?.start(workflowId);
      await advance.afterOutcome(
        { id: row.id, name: row.name, attempt: row.attempt, args: row.args, fanoutId: row.fanout_id, itemIndex: row.item_index, firstAttemptId: row.first_attempt_id },
        i.outcome,
      );
    }
    budget?.start(workflowId);
    await advance.settleArrivals();
  }
  o.at.where = { stage: 'write' };
  await w.finish(deps.emitEvents);
  for (const a of advances) if (a.ended) deps.cache.forget(a.wf.id);
  return {
    cancelledRunning: w.cancelledRunning,
    recorded: new Set(finished.keys()),
    createdWork: w.readyNow,
    claimed: w.claimed,
    ...(w.soonestDelayMs !== undefined ? { readyInMs: w.soonestDelayMs } : {}),
    ...(deferred.length > 0 ? { deferred } : {}),
  };
}
