/**
 * How many new workflows one admission takes, and how many of their first steps it may claim as
 * it creates them — a pure decision, from the executor's free slots and whether ready steps wait:
 *
 * - a free slot and no backlog: a whole batch (`admitBatch`), first steps claimed as far as the
 *   free slots allow (instant tools always); the rest are created ready for any executor;
 * - ready steps waiting: no more than it can start (half its free slots), so a long admission
 *   never holds back the claims that refill the slots;
 * - every slot busy: nothing for up to ADMIT_WAIT_MS (a slot usually frees by then), then a batch
 *   without claiming anything, so a full executor never keeps a new workflow `new` for long.
 */

/** How long new workflows wait for a free slot before a full executor admits them unclaimed. */
export const ADMIT_WAIT_MS = 100;

export type AdmissionPace = { admit: true; limit: number; claimSlots: number } | { admit: false; retryInMs: number };

export function admissionPace(p: { free: number; backlog: boolean; admitBatch: number; blockedForMs: number }): AdmissionPace {
  if (p.free > 0) {
    const claimSlots = p.backlog ? Math.ceil(p.free / 2) : p.free;
    return { admit: true, limit: p.backlog ? Math.min(p.admitBatch, claimSlots) : p.admitBatch, claimSlots };
  }
  if (p.blockedForMs < ADMIT_WAIT_MS) return { admit: false, retryInMs: ADMIT_WAIT_MS - p.blockedForMs };
  return { admit: true, limit: p.admitBatch, claimSlots: 0 };
}
