/**
 * src/executor/core/ — the shared floor of the executor: what the pipeline (admission, claims,
 * steps, outcomes), the transitions and the supervision all use, so it lives below all of them
 * and imports none of them (only src/db, src/flow and the like).
 *
 * - txWriter.ts — the statement writer of one transaction (TxWriter: new rows in one INSERT,
 *   workflows ended in one UPDATE, events) and the licence to claim what it creates (ClaimOnCreate).
 * - writerTransaction.ts — an executor transaction with its TxWriter (inWriterTransaction).
 * - txTypes.ts — the shapes every transaction shares: TxDeps, AdvanceDeps, FinishInput, Outcome, TxResult.
 * - workflowCache.ts — frozen, compiled flows of running workflows (WorkflowCache).
 * - dbOutage.ts — whether the database is reachable (DatabaseOutage) and backoff.
 * - batchPace.ts — the size of the next batch of a lane (admissions, outcomes).
 * - lockDeferrals.ts — rows a lane skips for a while after they met a lock held elsewhere (LockDeferrals).
 * - rowHeldElsewhere.ts — the error of a lane whose lock wait ran out, saying where (RowHeldElsewhere).
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
