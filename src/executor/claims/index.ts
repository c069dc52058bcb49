/**
 * src/executor/claims/ — the pipeline's second stage: ready steps become `running` under this
 * executor, up to the free tool slots plus a prefetch, and the slots themselves. Imports core/.
 *
 * - claimSteps.ts — the claims (one statement; fair across workflows, roles and users; counted
 *   under limits; poisoned rows isolated); claimGated.ts — the capacity claim (keys, rates);
 *   claimDeps.ts — what both are given and the claim state between claims; rowErrors.ts.
 * - slots.ts — tool slots, reservations, claim on create; runningTasks.ts — the steps running
 *   here and the prefetched ones waiting for a slot.
 * - skippedReadyRecheck.ts — a second look for ready steps a claim skipped.
 * - reportLookout.ts — further looks after a claim that took reported worker steps.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
