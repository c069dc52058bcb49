/**
 * src/executor/supervision/ — what keeps the executors honest about each other and themselves:
 * heartbeats, the leader's watchdog (dead executors, expired leases, gate and workflow
 * deadlines), recovery of orphans and strays, and the second half of a stop. Imports core/,
 * claims/, outcomes/, transitions/ and wakeups/; nothing below imports it.
 *
 * - heartbeat.ts — this executor's liveness row.
 * - watchdog.ts — the leader's sweep and each executor's own steps past their lease.
 * - recovery.ts — orphans after a crash, strays after an outage, running steps at a forced stop.
 * - shutdown.ts — drain, hand back, close.
 *
 * This file is the folder's map and exports nothing: import the files themselves.
 */
export {};
