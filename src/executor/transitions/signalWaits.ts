/**
 * Steps that wait for a signal, the executor's side (the pure part is src/flow/signalWait.ts, the
 * matching in the database is sql/0025).
 *
 *   create  In the transaction that creates the step (Advance.createStep): resolve the key, lock
 *           the wait's bucket, insert the pending row (no tool, no slot, expires_at its timeout),
 *           and ready it at once with the oldest matching signal this workflow has not consumed.
 *   wait    Pending: a signal inserted later readies it in the inserting transaction (a trigger).
 *           Clients cannot ready it by hand (guard). Past expires_at the watchdog fails it with
 *           `signal_timeout` (signalTimeoutOutcome), as it expires gates.
 *   settle  Never claimed: the outcome lane records the readied step straight from `ready`, with
 *           the signal as its result, in the transaction that starts its next step
 *           (claims/signalPickup.ts). One claimed anyway (an older executor; the retry of an
 *           attempt lost after a claim) completes the same way when it runs (signalOutcome).
 */
import { completeSignalWaitIfSignalled, lockSignalWaitBuckets, notifyStepsReady, type NewStep, type Queryable } from '../../db/queries.js';
import type { CompiledStep } from '../../flow/compiled.js';
import { SIGNAL_TIMEOUT, type ResolvedSignalWait } from '../../flow/signalWait.js';
import type { Outcome } from '../core/txTypes.js';
import type { TxWriter } from '../core/txWriter.js';

type StepBase = Pick<NewStep, 'workflowId' | 'name' | 'tool' | 'attempt' | 'fanoutId' | 'itemIndex'> & { firstAttemptId?: string };

/**
 * The wait a redriven attempt repeats: the names and key its failed row recorded (its key
 * template is not resolved twice), since as the flow says (a `"step"` wait starts afresh).
 */
export function signalWaitAgain(step: CompiledStep, args: unknown): ResolvedSignalWait {
  const recorded = (args as { signal?: { names?: unknown; key?: unknown } } | null)?.signal;
  const names = Array.isArray(recorded?.names) && recorded.names.every((n) => typeof n === 'string') ? (recorded.names as string[]) : (step.signal?.names ?? []);
  const key = typeof recorded?.key === 'string' ? recorded.key : null;
  return { names, key, since: step.signal?.since ?? 'workflow' };
}

/**
 * Creates the waiting row of `step` for `wait` (a first attempt: resolveSignalWait; a redriven
 * one: signalWaitAgain) and matches it at once; returns its id, whether it still waits, and what
 * it waits for (since as the database set it).
 */
export async function startSignalWait(
  ctx: { db: Queryable; writer: TxWriter; schema: string },
  step: CompiledStep,
  base: StepBase,
  wait: ResolvedSignalWait,
): Promise<{ id: string; waiting: boolean; wait: { names: string[]; key: string | null; since: string | null } }> {
  const timeout = step.signal?.timeoutMs;
  await ctx.writer.flush();
  // Before the row can be matched: a signal inserted meanwhile has committed (found below) or
  // waits for this transaction (and then finds the row).
  await lockSignalWaitBuckets(ctx.db, wait.names, wait.key);
  const args = { signal: { names: wait.names, key: wait.key, since: null } };
  const id = await ctx.writer.insertNow({ ...base, tool: null, args, status: 'pending', ...(timeout !== undefined ? { expiresInMs: timeout } : {}) });
  const state = await completeSignalWaitIfSignalled(ctx.db, id, wait.since);
  if (state?.status === 'ready') await notifyStepsReady(ctx.db, ctx.schema);
  return { id, waiting: state?.status !== 'ready', wait: { names: wait.names, key: wait.key, since: state?.since ?? null } };
}

/** The outcome of a claimed, readied signal step: the signal the database matched. */
export function signalOutcome(result: unknown): Outcome {
  if (result === null || typeof result !== 'object') {
    return { status: 'failed', error: { code: 'signal_lost', message: 'the signal step was readied without a signal', retryable: false } };
  }
  return { status: 'done', result };
}

/** What the watchdog records for a signal wait past its timeout. */
export function signalTimeoutOutcome(step: CompiledStep): Outcome {
  const names = step.signal?.names ?? [];
  return {
    status: 'failed',
    error: {
      code: SIGNAL_TIMEOUT,
      message: `no signal ${names.map((n) => JSON.stringify(n)).join(' or ')} came before the step's timeout`,
      retryable: false,
      details: { names },
    },
  };
}
