/**
 * The config's `retention` section (docs/operations.md, "Retention"): how long finished
 * workflows of each status, and signals, are kept. `"retention": {"completed": "30d", "failed":
 * "90d", "cancelled": "30d", "signals": "7d"}`; a status left out is kept for ever. Pure.
 */
import { z } from 'zod';
import { durationText as retentionDuration } from '../durationText.js';
import type { FinishedStatus } from '../db/queries/retention.js';

export const retentionSchema = z.strictObject({
  completed: retentionDuration.optional(),
  failed: retentionDuration.optional(),
  cancelled: retentionDuration.optional(),
  signals: retentionDuration.optional(),
});

/** Milliseconds each kind is kept (absent: for ever). */
export type RetentionPolicy = z.infer<typeof retentionSchema>;

export const FINISHED_STATUSES: readonly FinishedStatus[] = ['completed', 'failed', 'cancelled'];

/** Whether the policy removes anything at all. */
export function retentionIsEmpty(p: RetentionPolicy | undefined): boolean {
  return !p || (FINISHED_STATUSES.every((s) => p[s] === undefined) && p.signals === undefined);
}
