/**
 * A claimed step of a worker tool (config `workers`, sql/0027): the executor never calls the
 * tool. On its first claim the step is checked (the flow names the tool; the workflow's user may
 * call it: else it fails with `permission_denied` before any worker sees it) and handed to the
 * workers: `pending`, takeable through take_tasks, taking no executor slot. When a worker has
 * finished or failed it (or its lease ran out), the step is ready again with what happened, and
 * its claim records that as the step's outcome, as a readied gate's claim does: retries,
 * `onError`, transitions and the fence are the executor's as for any step.
 */
import type { ClaimedStep } from '../../db/queries.js';
import { StepError, type ErrorData } from '../../errors.js';
import type { CompiledStep } from '../../flow/compiled.js';
import type { Logger } from '../../logger.js';
import type { Outcome } from '../transitions/advance.js';
import type { StepPolicy } from './runStep.js';
import type { WorkerHandOffs } from './workerHandOffs.js';

export interface WorkerTaskDeps {
  log: Logger;
  /** The executor's hand-off batches (one statement for the steps of a claim). */
  handOffs: WorkerHandOffs;
  permissions?: StepPolicy;
}

/** The columns of sql/0027 a claimed row carries (claims return every column). */
interface TaskColumns {
  task_ended?: 'finished' | 'failed' | 'lost' | 'timeout' | null;
}

/** The timeout a worker gets: the flow's own, else the `workers` prefix's, else the default. */
export function workerTaskTimeoutMs(step: CompiledStep, served: { timeoutMs?: number }): number {
  return step.spec.timeout !== undefined ? step.timeoutMs : (served.timeoutMs ?? step.timeoutMs);
}

/**
 * The outcome a worker reported for this step, or undefined after handing it to the workers
 * (the step then waits for them; a step no longer running here is left alone). Throws
 * StepError for a refused step (runStep turns it into a failed outcome).
 */
export async function runWorkerTaskStep(deps: WorkerTaskDeps, row: ClaimedStep, step: CompiledStep, served: { timeoutMs?: number }): Promise<Outcome | undefined> {
  const ended = (row as ClaimedStep & TaskColumns).task_ended;
  if (ended === 'finished') return { status: 'done', result: row.result ?? null };
  if (ended) return { status: 'failed', error: reportedError(row.error, ended) };
  const tool = step.tool;
  if (!tool) throw new StepError('bad_step', `step "${row.name}" has no tool`);
  if (row.tool !== null && row.tool !== tool) {
    throw new StepError('step_mismatch', `step "${row.name}" row names tool "${row.tool}" but the flow says "${tool}"; refusing to run it`);
  }
  deps.permissions?.check(row.created_by, tool);
  const handed = await deps.handOffs.hand(row.id, workerTaskTimeoutMs(step, served));
  if (!handed) deps.log.warn({ workflowId: row.workflow_id, stepId: row.id }, 'worker step no longer running here; not handed to the workers');
  return undefined;
}

/** The error a worker stored (fail_task checked its shape), or one saying what ended the task. */
function reportedError(error: ErrorData | null, ended: string): ErrorData {
  if (error && typeof error.code === 'string' && typeof error.message === 'string') return error;
  return { code: ended === 'failed' ? 'worker_error' : ended, message: `the worker task ended: ${ended}`, retryable: ended !== 'failed' };
}
