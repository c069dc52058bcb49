/**
 * src/executor/transitions/ — what happens to a workflow after a step: inside a transaction
 * that holds the workflow row, apply an outcome (Advance: ask the pure resolver, src/flow/,
 * and write through the transaction's TxWriter), settle fan-outs (forks, joins, policies), start
 * sub-workflows and signal waits, and redrive failed workflows. Imports only core/.
 *
 * - advance.ts — one workflow's transitions in one transaction (Advance).
 * - forkSettlement.ts, forkCompletion.ts, forkHost.ts — arrivals at forks, joins created once,
 *   completion policies; forkHost.ts is the interface both settle through.
 * - scope.ts — the template scope a step reads; capacityFields.ts — keys and rates of a new row.
 * - subWorkflows.ts — children started by a step; signalWaits.ts — steps waiting for a signal.
 * - redrive.ts, redriveCheck.ts, redrivePlan.ts — redrive requests: the transaction, the check
 *   shared with `stepd retry`, the pure plan.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
