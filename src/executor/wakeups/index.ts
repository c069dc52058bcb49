/**
 * src/executor/wakeups/ — how the claim loop learns that there is work: the listener's NOTIFYs
 * (hints, never facts), its alarm clock, and cancellations confirmed before they act. The
 * listener's session is also the one the executor's leases name. Imports core/.
 *
 * - listener.ts — the dedicated LISTEN connection and the executor's leases.
 * - wakeupHint.ts — a wake-up parsed strictly; waker.ts — wake(), wait(ms), wakeIn(ms).
 * - cancelChecks.ts — cancellation hints read in batches against the workflow rows.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
