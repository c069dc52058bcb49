/**
 * src/executor/outcomes/ — the pipeline's last stage: finished steps' outcomes recorded in
 * batches, one transaction each, fenced by the step's owner, their workflows advanced (through
 * transitions/) in the same transaction. Kept across an outage. Imports core/ and transitions/.
 *
 * - outcomeQueue.ts — the queue and its drain, round-robin across lanes (outcomeLanes.ts).
 * - transactions.ts — finishSteps and the other outcome transactions, retried row by row.
 * - outcomeBatch.ts — one batch: lock, record, advance, settle, write.
 * - outcomeBudget.ts, outcomeLocks.ts — what a shared batch hands to the alone lane.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
