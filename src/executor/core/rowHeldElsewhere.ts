/**
 * A lane's transaction met a row lock held elsewhere past its lock wait (55P03): the one error
 * admission and the outcome batches both throw, saying where it met the lock, so the lane redoes
 * its batch without what met it (admission/admissionLocks.ts, outcomes/outcomeLocks.ts).
 */

/** Where a lane's transaction met a lock held elsewhere, and so what it is redone without. */
export type HeldStage =
  /** Admitting one workflow: the admission batch is redone without it, and it is deferred (LockDeferrals). */
  | { stage: 'admit'; workflowId: string }
  /** Finishing a shared outcome batch's steps (a step row held): the batch is redone skipping held step rows. */
  | { stage: 'steps' }
  /** Applying one workflow's outcomes: the batch is redone without that workflow. */
  | { stage: 'advance'; workflowId: string }
  /** An outcome batch's last writes (rows, ends, events): each workflow is redone on its own. */
  | { stage: 'write' };

/** The stages of a shared outcome batch (every stage but admission's). */
export type OutcomeHeldStage = Exclude<HeldStage, { stage: 'admit' }>;

const WHAT_MET_IT: { [S in HeldStage['stage']]: string } = {
  admit: 'admitting a workflow',
  steps: "finishing an outcome batch's steps",
  advance: "applying a workflow's outcomes",
  write: "an outcome batch's last writes",
};

/** A row lock held by another transaction was not granted within `lockWaitMs` (55P03); `where` says what to redo. */
export class RowHeldElsewhere extends Error {
  /** `admission_lock_held` while admitting, `row_held_elsewhere` in an outcome batch. */
  readonly code: 'admission_lock_held' | 'row_held_elsewhere';
  readonly retryable = true;
  /** The workflow the held row belongs to, where the stage names one. */
  readonly workflowId: string | undefined;
  constructor(
    readonly where: HeldStage,
    readonly lockWaitMs: number,
    cause: unknown,
  ) {
    const workflowId = 'workflowId' in where ? where.workflowId : undefined;
    super(`${WHAT_MET_IT[where.stage]}${workflowId === undefined ? '' : ` (workflow ${workflowId})`} met a row lock held by another transaction for more than ${lockWaitMs} ms`, { cause });
    this.code = where.stage === 'admit' ? 'admission_lock_held' : 'row_held_elsewhere';
    this.workflowId = workflowId;
  }
}
