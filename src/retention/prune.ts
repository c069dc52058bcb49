/**
 * Removes what the retention policy no longer keeps, in small batches (each its own statement,
 * so no transaction holds many rows for long): finished top-level workflows past their status's
 * retention (their steps and children with them, through delete_workflows) and old signals. The
 * watchdog's leader runs it at every sweep (a bounded number of batches); `stepd prune` runs it
 * until nothing is left, or lists what it would delete with `dryRun`.
 */
import type { Queryable } from '../db/queries/common.js';
import {
  deleteFinishedWorkflowsPastRetention,
  deleteSignalsPastRetention,
  listFinishedWorkflowsPastRetention,
  type PruneCandidate,
} from '../db/queries/retention.js';
import { FINISHED_STATUSES, type RetentionPolicy } from './retentionPolicy.js';

export const DEFAULT_PRUNE_BATCH = 200;

export interface PruneOptions {
  /** Rows per statement (default 200). */
  batch?: number;
  /** Batches per kind at most (default: until nothing is left). */
  maxBatches?: number;
  /** Only workflows of this name / user. */
  name?: string;
  user?: string;
  /** List what would be deleted (at most `batch` per status) instead of deleting. */
  dryRun?: boolean;
}

export interface PruneReport {
  /** Top-level workflows deleted (or, with dryRun, that would be), per status. */
  workflows: Record<string, number>;
  signals: number;
  /** With dryRun: the workflows a batch would delete. */
  candidates?: PruneCandidate[];
}

export async function pruneOnce(db: Queryable, policy: RetentionPolicy, opts: PruneOptions = {}): Promise<PruneReport> {
  const batch = opts.batch ?? DEFAULT_PRUNE_BATCH;
  const maxBatches = opts.maxBatches ?? Number.POSITIVE_INFINITY;
  const report: PruneReport = { workflows: {}, signals: 0, ...(opts.dryRun ? { candidates: [] } : {}) };
  for (const status of FINISHED_STATUSES) {
    const olderThanMs = policy[status];
    if (olderThanMs === undefined) continue;
    const filter = { status, olderThanMs, limit: batch, ...(opts.name !== undefined ? { name: opts.name } : {}), ...(opts.user !== undefined ? { user: opts.user } : {}) };
    if (opts.dryRun) {
      const listed = await listFinishedWorkflowsPastRetention(db, filter);
      report.candidates!.push(...listed);
      report.workflows[status] = listed.length;
      continue;
    }
    let total = 0;
    for (let i = 0; i < maxBatches; i++) {
      const gone = await deleteFinishedWorkflowsPastRetention(db, filter);
      total += gone.length;
      if (gone.length < batch) break;
    }
    report.workflows[status] = total;
  }
  // Signals are the world's facts, not a workflow's: retention by age only (no name or user filter).
  if (policy.signals !== undefined && opts.name === undefined && opts.user === undefined) {
    for (let i = 0; i < maxBatches; i++) {
      const n = await deleteSignalsPastRetention(db, policy.signals, batch, opts.dryRun);
      report.signals += n;
      if (n < batch || opts.dryRun) break;
    }
  }
  return report;
}

/** Top-level workflows deleted in all. */
export function prunedWorkflows(r: PruneReport): number {
  return Object.values(r.workflows).reduce((a, b) => a + b, 0);
}
