/**
 * The executor's transactions. Each locks the workflow rows it touches first (in id order, so
 * concurrent batches never deadlock), which serializes the transitions of one workflow even
 * across executors; then Advance decides and writes through one shared TxWriter.
 *
 * Outcomes are recorded in batches: many finished steps, one transaction, one commit.
 */
import type pg from 'pg';
import { withTransaction } from '../db/connect.js';
import { endWorkflowCancellingLiveSteps, limitLockWaitsInTransaction, lockWorkflows, notifyEvents } from '../db/queries.js';
import type { ClientsConfig } from '../configFile.js';
import { isLockNotAvailable, isRetryablePgError } from '../errors.js';
import { EVENTS_CHANNEL } from '../events.js';
import type { AdvanceDeps, Outcome } from './advance.js';
import { HeavyOutcome } from './outcomeBudget.js';
import { ALONE_LOCK_WAIT_MS, recordOutcomeBatch } from './outcomeBatch.js';
import type { ClaimOnCreate, CreatedClaim } from './txWriter.js';
import type { WorkflowCache } from './workflowCache.js';
import { emptyTxResult } from './writerTransaction.js';

export { HEAVY_OUTCOME_STATEMENTS } from './outcomeBudget.js';
export { admitWorkflows, type Admission } from './admission.js';

export interface TxDeps extends AdvanceDeps {
  pool: pg.Pool;
  cache: WorkflowCache;
  executorId: string;
  /** Which users each database role may start workflows as (config `clients`). */
  clients?: ClientsConfig | undefined;
  /** Told, after commit, of the workflows a transaction ended (completed or failed): their trace spans. */
  onWorkflowsEnded?: ((workflowIds: string[]) => void) | undefined;
}

export interface TxResult {
  /** Running steps this transaction cancelled; abort their tools. */
  cancelledRunning: string[];
  /** Steps whose outcome was recorded (the others were no longer ours: late results). */
  recorded: Set<string>;
  /** Whether this transaction created steps ready now for the claim loop (wake it). */
  createdWork: boolean;
  /** The soonest a step it created with a delay (retry backoff, timer) becomes ready. */
  readyInMs?: number;
  /** Steps created already claimed by this executor: start them now. */
  claimed: CreatedClaim[];
  /**
   * Outcomes this batch did not record, to be recorded each in a transaction of its own (they
   * come back with `alone: true`): their workflow was locked by another transaction, or settling
   * it took more than HEAVY_OUTCOME_STATEMENTS statements. So one heavy or blocked workflow never
   * holds the commit of the others.
   */
  deferred?: FinishInput[];
}

const empty = emptyTxResult;

export type FinishGuard = 'running' | 'lease-expired' | 'gate-expired';

export interface FinishInput {
  stepId: string;
  workflowId: string;
  guard: FinishGuard;
  outcome: Outcome;
  args?: unknown;
  /**
   * Record this outcome in a transaction of its own workflow: wait for the workflow's row lock
   * and settle whatever it takes. Without it, a batch skips workflows locked elsewhere and
   * outcomes whose settling is heavy, and hands them back in TxResult.deferred.
   */
  alone?: boolean;
  /** Its workflow's role and user: the outcome queue takes each batch round-robin across them (outcomeLanes.ts). */
  lane?: string;
  user?: string | null;
}

/** PostgreSQL refused a JSON value: `\u0000` in a string (22P05) or a lone surrogate (22P02). */
function isUnstorableJson(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22P05' || code === '22P02';
}

/**
 * Records the outcomes (each fenced by its guard) and advances their workflows, in one
 * transaction. If the batch fails for a reason other than a lost connection, each outcome is
 * recorded on its own, so one bad outcome never holds the others back; an outcome PostgreSQL
 * cannot store (a NUL character in a result) fails its attempt with `invalid_result`.
 */
export async function finishSteps(deps: TxDeps, given: FinishInput[], claim?: ClaimOnCreate): Promise<TxResult> {
  // One outcome per step: a second one in the same batch would advance its workflow twice.
  const inputs = onePerStep(given, deps);
  if (inputs.length === 0) return empty();
  try {
    return await recordOutcomeBatch(deps, inputs, claim);
  } catch (err) {
    if (err instanceof HeavyOutcome) {
      // Redo the batch without that workflow; its outcomes get a transaction of their own.
      const heavy = inputs.filter((i) => i.workflowId === err.workflowId).map((i) => ({ ...i, alone: true }));
      deps.log.info({ workflowId: err.workflowId, stepIds: heavy.map((i) => i.stepId) }, 'settling this workflow is heavy: recording its outcomes in a transaction of their own');
      const r = await finishSteps(deps, inputs.filter((i) => i.workflowId !== err.workflowId), claim);
      return { ...r, deferred: [...(r.deferred ?? []), ...heavy] };
    }
    // A row held elsewhere past the lane's lock wait: the queue tries the workflow again later.
    if (isRetryablePgError(err) || isLockNotAvailable(err)) throw err;
    if (inputs.length > 1) {
      deps.log.warn({ err, count: inputs.length }, 'recording a batch of outcomes failed; recording them one by one');
      const merged = empty();
      for (const input of inputs) {
        const r = await finishSteps(deps, [input], claim);
        merged.cancelledRunning.push(...r.cancelledRunning);
        for (const id of r.recorded) merged.recorded.add(id);
        merged.createdWork ||= r.createdWork;
        merged.claimed.push(...r.claimed);
        if (r.deferred) (merged.deferred ??= []).push(...r.deferred);
        if (r.readyInMs !== undefined) merged.readyInMs = Math.min(merged.readyInMs ?? Infinity, r.readyInMs);
      }
      return merged;
    }
    const input = inputs[0]!;
    if (!isUnstorableJson(err)) throw err;
    deps.log.warn({ err, workflowId: input.workflowId, stepId: input.stepId }, 'step outcome cannot be stored; failing the step');
    const error = { code: 'invalid_result', message: `the step's outcome cannot be stored as PostgreSQL JSON: ${(err as Error).message}`, retryable: false };
    return recordOutcomeBatch(deps, [{ stepId: input.stepId, workflowId: input.workflowId, guard: input.guard, outcome: { status: 'failed', error } }], claim);
  }
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
