/**
 * src/executor/steps/ — the pipeline's third stage: a claimed step runs — its tool called with
 * the frozen flow's arguments, a worker step handed to the workers, a readied gate checked — and
 * its outcome goes to the outcome queue. Imports core/, claims/, outcomes/ and transitions/.
 *
 * - stepTasks.ts — each claimed step as its own task, with its metrics and trace span.
 * - stepReports.ts — a step's end log line; a recorded signal wait's metrics, span and log line.
 * - runStep.ts — one tool call (templates, permissions, timeout); every failure an outcome.
 * - workerTaskStep.ts — the hand-off of a step to the workers (src/workers/).
 * - workerHandOffs.ts — a claim's worker steps handed over in one statement.
 * - gateReadying.ts — a readying that may not stand; costBudget.ts — model cost budgets.
 * - stepProgress.ts, progressThrottle.ts — progress reports of a running step.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
