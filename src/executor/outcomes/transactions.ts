/**
 * The executor's transactions. Each locks the workflow rows it touches first (in id order, so
 * concurrent batches never deadlock), which serializes the transitions of one workflow even
 * across executors; then Advance decides and writes through one shared TxWriter.
 *
 * Outcomes are recorded in batches: many finished steps, one transaction, one commit.
 */
import type pg from 'pg';
import { withTransaction } from '../../db/connect.js';
import { endWorkflowCancellingLiveSteps, limitLockWaitsInTransaction, lockWorkflows, notifyEvents } from '../../db/queries.js';
import { isLockNotAvailable, isRetryablePgError } from '../../errors.js';
import { EVENTS_CHANNEL } from '../../events.js';
import { HeavyOutcome } from './outcomeBudget.js';
import { ALONE_LOCK_WAIT_MS, recordOutcomeBatch, type BatchOptions } from './outcomeBatch.js';
import type { ClaimOnCreate } from '../core/txWriter.js';
import type { FinishInput, TxDeps, TxResult } from '../core/txTypes.js';
import { emptyTxResult } from '../core/writerTransaction.js';
import { RowHeldElsewhere } from '../core/rowHeldElsewhere.js';

export { HEAVY_OUTCOME_STATEMENTS } from './outcomeBudget.js';
export type { FinishGuard, FinishInput, TxDeps, TxResult } from '../core/txTypes.js';

const empty = emptyTxResult;

/** PostgreSQL refused a JSON value: `\u0000` in a string (22P05) or a lone surrogate (22P02). */
function isUnstorableJson(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22P05' || code === '22P02';
}

/**
 * Records the outcomes (each fenced by its guard) and advances their workflows, in one
 * transaction. If the batch fails for a reason other than a lost connection, each outcome is
 * recorded on its own, so one bad outcome never holds the others back; an outcome PostgreSQL
 * cannot store (a NUL character in a result) fails its attempt with `invalid_result`. A shared
 * batch that meets a row lock held elsewhere (RowHeldElsewhere) is redone without what met it,
 * which is handed back in `deferred` for the alone lane: nothing is dropped, nothing waits on it.
 */
export async function finishSteps(deps: TxDeps, given: FinishInput[], claim?: ClaimOnCreate, opts: BatchOptions = {}): Promise<TxResult> {
  // One outcome per step: a second one in the same batch would advance its workflow twice.
  const inputs = onePerStep(given, deps);
  if (inputs.length === 0) return empty();
  try {
    return await recordOutcomeBatch(deps, inputs, claim, opts);
  } catch (err) {
    const aside = workflowToSetAside(err);
    if (aside !== undefined) {
      // Redo the batch without that workflow; its outcomes get a transaction of their own.
      const later = inputs.filter((i) => i.workflowId === aside).map((i) => ({ ...i, alone: true }));
      const stepIds = later.map((i) => i.stepId);
      if (err instanceof HeavyOutcome) deps.log.info({ workflowId: aside, stepIds }, 'settling this workflow is heavy: recording its outcomes in a transaction of their own');
      else deps.log.debug({ workflowId: aside, stepIds }, 'a row of this workflow is held by another transaction: recording its outcomes after the others');
      const r = await finishSteps(deps, inputs.filter((i) => i.workflowId !== aside), claim, opts);
      return { ...r, deferred: [...(r.deferred ?? []), ...later] };
    }
    if (err instanceof RowHeldElsewhere) return redoAroundHeldRows(deps, inputs, claim, opts, err);
    // A row held elsewhere past the lane's lock wait: the queue tries the workflow again later.
    if (isRetryablePgError(err) || isLockNotAvailable(err)) throw err;
    if (inputs.length > 1) {
      deps.log.warn({ err, count: inputs.length }, 'recording a batch of outcomes failed; recording them one by one');
      const results: TxResult[] = [];
      for (const input of inputs) results.push(await finishSteps(deps, [input], claim));
      return merged(results);
    }
    const input = inputs[0]!;
    if (!isUnstorableJson(err)) throw err;
    deps.log.warn({ err, workflowId: input.workflowId, stepId: input.stepId }, 'step outcome cannot be stored; failing the step');
    const error = { code: 'invalid_result', message: `the step's outcome cannot be stored as PostgreSQL JSON: ${(err as Error).message}`, retryable: false };
    return recordOutcomeBatch(deps, [{ stepId: input.stepId, workflowId: input.workflowId, guard: input.guard, outcome: { status: 'failed', error } }], claim);
  }
}

/** The workflow a shared batch is redone without: heavy to settle, or one of its rows held elsewhere while it was applied. */
function workflowToSetAside(err: unknown): string | undefined {
  if (err instanceof HeavyOutcome) return err.workflowId;
  if (err instanceof RowHeldElsewhere && err.where.stage === 'advance') return err.where.workflowId;
  return undefined;
}

/**
 * A shared batch met a held row outside any one workflow's advance. Finishing the steps (a held
 * step row): redone skipping held step rows, which are deferred. The last writes (or again):
 * each workflow is redone on its own, and a workflow alone that still meets it is deferred.
 */
async function redoAroundHeldRows(deps: TxDeps, inputs: FinishInput[], claim: ClaimOnCreate | undefined, opts: BatchOptions, err: RowHeldElsewhere): Promise<TxResult> {
  if (err.where.stage === 'steps' && !opts.skipHeldSteps) return finishSteps(deps, inputs, claim, { ...opts, skipHeldSteps: true });
  const byWorkflow = new Map<string, FinishInput[]>();
  for (const i of inputs) byWorkflow.set(i.workflowId, [...(byWorkflow.get(i.workflowId) ?? []), i]);
  if (byWorkflow.size === 1) {
    deps.log.debug({ workflowId: inputs[0]!.workflowId, stepIds: inputs.map((i) => i.stepId) }, 'a row is held by another transaction: recording these outcomes after the others');
    return { ...empty(), deferred: inputs.map((i) => ({ ...i, alone: true })) };
  }
  const results: TxResult[] = [];
  for (const group of byWorkflow.values()) results.push(await finishSteps(deps, group, claim, opts));
  return merged(results);
}

/** The results of several transactions as one. */
function merged(results: TxResult[]): TxResult {
  const out = empty();
  for (const r of results) {
    out.cancelledRunning.push(...r.cancelledRunning);
    for (const id of r.recorded) out.recorded.add(id);
    out.createdWork ||= r.createdWork;
    out.claimed.push(...r.claimed);
    if (r.deferred) (out.deferred ??= []).push(...r.deferred);
    if (r.readyInMs !== undefined) out.readyInMs = Math.min(out.readyInMs ?? Infinity, r.readyInMs);
  }
  return out;
}

function onePerStep(inputs: FinishInput[], deps: TxDeps): FinishInput[] {
  const seen = new Set<string>();
  const out = inputs.filter((i) => !seen.has(i.stepId) && seen.add(i.stepId));
  if (out.length < inputs.length) deps.log.warn({ dropped: inputs.length - out.length }, 'dropped a second outcome of the same step in one batch');
  return out;
}

/** Records one outcome, alone (nothing is deferred): the watchdog's and recovery's entry point. */
export function finishStep(deps: TxDeps, input: FinishInput): Promise<TxResult> {
  return finishSteps(deps, [{ ...input, alone: true }]);
}

/** The workflow ran past its flow's `timeout`: fail it with `deadline`. */
export async function failOverdueWorkflow(deps: TxDeps, workflowId: string): Promise<TxResult> {
  const r = await withTransaction(deps.pool, async (client): Promise<TxResult> => {
    // The watchdog's: a row held elsewhere past the wait fails with 55P03 (retried at its next sweep).
    await limitLockWaitsInTransaction(client, ALONE_LOCK_WAIT_MS);
    const [locked] = await lockWorkflows(client, [workflowId]);
    if (!locked || locked.status !== 'running') return empty();
    const error = { code: 'deadline', message: 'workflow ran past its timeout' };
    const cancelledRunning = await endWorkflowCancellingLiveSteps(client, workflowId, { status: 'failed', error });
    deps.cache.forget(workflowId);
    if (deps.emitEvents) {
      await notifyEvents(client, EVENTS_CHANNEL, [
        JSON.stringify({ type: 'workflow.failed', schema: deps.schema, workflowId, error, at: new Date().toISOString() }),
      ]);
    }
    deps.log.info({ workflowId, error }, 'workflow failed');
    return { ...empty(), cancelledRunning, recorded: new Set([workflowId]) };
  });
  if (r.recorded.size > 0) deps.onWorkflowsEnded?.([workflowId]);
  return r;
}
