/**
 * Admission's lock wait. The executor creates a signal wait's row under its bucket lock (sql/0025),
 * which a client can hold open (a signal's transaction left open), as it can hold other rows the
 * admission of its own workflow touches. An admission transaction waits for a lock at most
 * ADMISSION_LOCK_WAIT_MS; past it the batch is redone without the workflow that met the lock,
 * which stays `new` and is tried again after a backoff (LockDeferrals), as a shared outcome batch
 * hands a held workflow to the alone lane (outcomeLocks.ts). Nothing is created without its lock:
 * the held workflow is simply not admitted yet, so only workflows meeting that same lock wait.
 */
import { RowHeldElsewhere } from '../core/rowHeldElsewhere.js';

/** An admission transaction's lock wait (`lock_timeout`, set in its BEGIN). */
export const ADMISSION_LOCK_WAIT_MS = 500;

/** The workflow whose admission met a row lock held elsewhere (RowHeldElsewhere at stage `admit`), if `err` is that. */
export function workflowHeldAtAdmission(err: unknown): string | undefined {
  return err instanceof RowHeldElsewhere && err.where.stage === 'admit' ? err.where.workflowId : undefined;
}
