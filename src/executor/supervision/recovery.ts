/**
 * What an executor does about steps recorded as running under its id that it is not running:
 * after a crash of an earlier run (`recoverOrphans`), after an outage that swallowed a claim's
 * answer (`handBackStrays`), and at a forced stop (`handBackRunning`).
 */
import type pg from 'pg';
import { findRunningStepsOfExecutor, findStepsNoLongerRunning, handBackSettlingSubWorkflowSteps, notifyStepsReady, releaseStepsIfRunning } from '../../db/queries.js';
import { StepError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Outcome } from '../transitions/advance.js';
import type { OutcomeQueue } from '../outcomes/outcomeQueue.js';
import type { RunningTasks } from '../claims/runningTasks.js';
import { finishStep, type TxDeps, type TxResult } from '../outcomes/transactions.js';

/** Steps left running by an earlier run of this executor (a crash) fail as `lost` and are retried at once. */
export async function recoverOrphans(tx: TxDeps, onResult: (r: TxResult) => void): Promise<number> {
  // Steps that were recording a finished sub-workflow's outcome go back to ready (the outcome is on the row).
  if ((await handBackSettlingSubWorkflowSteps(tx.pool, { executorId: tx.executorId, whose: 'own' })) > 0) await notifyStepsReady(tx.pool, tx.schema);
  const orphans = await findRunningStepsOfExecutor(tx.pool, tx.executorId);
  for (const o of orphans) {
    const outcome: Outcome = {
      status: 'failed',
      error: { code: 'lost', message: 'the executor stopped while this step was running', retryable: true },
    };
    onResult(await finishStep(tx, { stepId: o.id, workflowId: o.workflow_id, guard: 'running', outcome }));
  }
  if (orphans.length > 0) tx.log.warn({ count: orphans.length }, 'recovered steps left running by an earlier run');
  return orphans.length;
}

export interface StrayDeps {
  pool: pg.Pool;
  executorId: string;
  schema: string;
  log: Logger;
  /**
   * Which steps this process runs, or finished and is waiting to record: asked after the query,
   * so a step that finished while it ran (its task gone, its outcome queued) still counts as ours.
   */
  ours: () => (stepId: string) => boolean;
}

/**
 * A claim (or a transaction claiming the steps it created) whose COMMIT went through but whose
 * answer was lost left steps `running` under this executor that it never started. They are
 * handed back as ready without spending an attempt (no tool ran). The caller makes sure no
 * recording transaction runs meanwhile, so none can claim a step under our feet. Returns how
 * many were handed back.
 */
export async function handBackStrays(deps: StrayDeps): Promise<number> {
  const rows = await findRunningStepsOfExecutor(deps.pool, deps.executorId);
  const isOurs = deps.ours();
  const strays = rows.map((r) => r.id).filter((id) => !isOurs(id));
  if (strays.length === 0) return 0;
  const released = await releaseStepsIfRunning(deps.pool, deps.executorId, strays);
  deps.log.warn({ released, stepIds: strays }, "handed back steps claimed while the connection was lost (the claim's answer never arrived)");
  if (released > 0) await notifyStepsReady(deps.pool, deps.schema);
  return released;
}

/** A forced stop: running steps go back to ready without spending an attempt. Returns how many could be. */
export async function handBackRunning(deps: Omit<StrayDeps, 'ours'>, ids: string[]): Promise<number> {
  const released = await releaseStepsIfRunning(deps.pool, deps.executorId, ids).catch((err: unknown) => {
    deps.log.error({ err }, 'could not hand back running steps; the watchdog will rescue them');
    return 0;
  });
  deps.log.info({ released }, 'handed running steps back as ready');
  if (released > 0) await notifyStepsReady(deps.pool, deps.schema).catch(() => {});
  return released;
}

/**
 * After an outage: hands back the steps a claim took whose answer never arrived, while no batch
 * of outcomes is being recorded (what is ours: running here, or its outcome waiting). Returns how many.
 */
export function handBackStraysAfterOutage(deps: Omit<StrayDeps, 'ours'>, running: RunningTasks, outcomes: OutcomeQueue): Promise<number> {
  return outcomes.exclusive(() => {
    const ours = () => {
      const waiting = outcomes.stepIds();
      return (id: string) => running.has(id) || waiting.has(id);
    };
    return handBackStrays({ ...deps, ours });
  });
}

/** Aborts the tools of steps no longer running here: cancelled, or rescued from us as presumed dead. */
export async function abortStepsNoLongerOurs(pool: pg.Pool, executorId: string, running: RunningTasks): Promise<void> {
  const gone = await findStepsNoLongerRunning(pool, executorId, running.ids());
  for (const id of gone) running.abort(id, new StepError('cancelled', 'step is no longer running here (cancelled or rescued)'));
}
