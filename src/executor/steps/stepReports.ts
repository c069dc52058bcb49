/**
 * What a step that ended reports besides its row. A step this executor ran (stepTasks.ts) gets
 * its metrics and trace span around its task, and the `step done` / `step failed` log line
 * (logStepEnded). A readied signal wait is never run: the outcome lane records it straight from
 * `ready` (claims/signalPickup.ts); once recorded here it reports what a toolless step that ran
 * does (reportRecordedSignalWait): started and ended on the metrics (no tool, 0 seconds), a
 * zero-length step span at the moment it was recorded, and the same log line (`ms` 0). A wait
 * another executor recorded first reports nothing here.
 */
import type { ReadiedSignalWait } from '../../db/queries.js';
import type { Logger } from '../../logger.js';
import { stepResultLabel, type ExecutorMetrics } from '../../telemetry/executorMetrics.js';
import type { StepTracing } from '../../telemetry/stepTracing.js';
import type { Outcome } from '../core/txTypes.js';

/** Which step attempt ended, and how long it ran (ms). */
export interface StepEnd {
  workflowId: string;
  stepId: string;
  step: string;
  attempt: number;
  ms: number;
}

/** The log line of a step attempt that ended with an outcome (and what it spent, if anything). */
export function logStepEnded(log: Logger, end: StepEnd, outcome: Outcome): void {
  const spent = outcome.usage ? { usage: outcome.usage } : {};
  if (outcome.status === 'done') log.info({ ...end, ...spent }, 'step done');
  else log.info({ ...end, error: outcome.error, ...spent }, 'step failed');
}

export interface SignalWaitReportDeps {
  log: Logger;
  metrics: ExecutorMetrics;
  tracing: StepTracing;
}

/** A readied signal wait this executor's outcome lane recorded: counted, traced and logged as a toolless step that ran. */
export function reportRecordedSignalWait(deps: SignalWaitReportDeps, wait: ReadiedSignalWait, outcome: Outcome): void {
  try {
    deps.metrics.stepStarted(null, wait.attempt);
    deps.metrics.stepEnded(null, 0, stepResultLabel(outcome));
    deps.tracing.startStep({ workflowId: wait.workflow_id, stepId: wait.id, stepName: wait.name, attempt: wait.attempt, tool: null }).end(outcome);
  } catch (err) {
    // Reported from the lane's settling: a metrics or tracing fault must not reach it.
    deps.log.warn({ err, stepId: wait.id }, 'could not report a recorded signal wait to metrics or tracing');
  }
  logStepEnded(deps.log, { workflowId: wait.workflow_id, stepId: wait.id, step: wait.name, attempt: wait.attempt, ms: 0 }, outcome);
}
