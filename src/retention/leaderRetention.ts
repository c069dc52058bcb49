/**
 * The watchdog leader's share of retention: at each sweep, a few small batches of what the
 * policy no longer keeps (prune.ts). Bounded per sweep, so a backlog drains over several sweeps
 * without holding up the watchdog's rescues; a failed batch is logged and tried again next sweep.
 */
import type { Queryable } from '../db/queries/common.js';
import type { Logger } from '../logger.js';
import { pruneOnce, prunedWorkflows } from './prune.js';
import { retentionIsEmpty, type RetentionPolicy } from './retentionPolicy.js';
import { deleteStaleNotificationRows } from '../db/queries/notifications.js';

/** Outbox rows no notifier took within this long are dropped (no daemon has `notify`, or none ran). */
export const STALE_OUTBOX_MS = 3_600_000;

/** Batches per kind and per sweep, of this many rows each. */
export const LEADER_BATCHES = 5;
export const LEADER_BATCH_ROWS = 200;

export async function pruneAsLeader(deps: { pool: Queryable; log: Logger; policy: RetentionPolicy | undefined }): Promise<void> {
  try {
    await deleteStaleNotificationRows(deps.pool, STALE_OUTBOX_MS, LEADER_BATCH_ROWS);
  } catch (err) {
    deps.log.warn({ err }, 'dropping stale notification rows failed; trying again at the next sweep');
  }
  if (retentionIsEmpty(deps.policy)) return;
  try {
    const r = await pruneOnce(deps.pool, deps.policy!, { batch: LEADER_BATCH_ROWS, maxBatches: LEADER_BATCHES });
    const n = prunedWorkflows(r);
    if (n > 0 || r.signals > 0) deps.log.info({ workflows: r.workflows, signals: r.signals }, 'retention: deleted finished workflows and old signals');
  } catch (err) {
    deps.log.warn({ err }, 'retention batch failed; trying again at the next sweep');
  }
}
