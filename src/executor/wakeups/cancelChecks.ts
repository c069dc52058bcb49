/**
 * Cancellation wake-ups, confirmed before they act. A `cancelled` wake-up names a workflow, but
 * any role may send one, so the executor reads the workflow rows first and aborts running tools
 * only of the workflows whose row says `cancelled` (findWorkflowIdsIfCancelled). Hints are
 * gathered in a set (a flood naming one workflow 60,000 times is one id), and read in batches of
 * at most CHECK_BATCH ids, one statement each, one batch at a time: a flood costs a few reads,
 * never one per notification. Only workflows running here are checked (and, when `checkAll`, up
 * to MAX_UNRUN others, for their traces). A failed read drops the batch: the watchdog's sweep finds
 * cancelled steps from their own rows anyway (abortStepsNoLongerOurs).
 */
import { findWorkflowIdsIfCancelled, type Queryable } from '../../db/queries.js';
import type { Logger } from '../../logger.js';

/** Workflow ids read in one statement. */
export const CHECK_BATCH = 1_000;
/** Hinted workflows not running here kept for a check (only when `checkAll`). */
const MAX_UNRUN = 10_000;

export interface CancelChecksDeps {
  pool: Queryable;
  log: Logger;
  /** Whether a step of the workflow runs here (the only hints worth a read, unless `checkAll`). */
  runsHere: (workflowId: string) => boolean;
  /** Check workflows that run nowhere here too (tracing records their end). */
  checkAll: boolean;
  /** The workflows whose rows say cancelled. */
  onCancelled: (workflowIds: string[]) => void;
}

export class CancelChecks {
  private readonly pending = new Set<string>();
  private unrun = 0;
  private draining: Promise<void> | undefined;

  constructor(private readonly deps: CancelChecksDeps) {}

  /** A wake-up said this workflow was cancelled: its row is read soon (with the other hints of the moment). */
  note(workflowId: string): void {
    if (this.pending.has(workflowId)) return;
    if (!this.deps.runsHere(workflowId)) {
      if (!this.deps.checkAll || this.unrun >= MAX_UNRUN) return;
      this.unrun++;
    }
    this.pending.add(workflowId);
    this.draining ??= this.drain().finally(() => (this.draining = undefined));
  }

  /** Settles when the hints noted so far have been checked. */
  async idle(): Promise<void> {
    await this.draining;
  }

  private async drain(): Promise<void> {
    // The rest of a burst arrives in the same socket read: let it join the first batch.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.size > 0) {
      const batch: string[] = [];
      for (const id of this.pending) if (batch.push(id) >= CHECK_BATCH) break;
      for (const id of batch) this.pending.delete(id);
      this.unrun = Math.min(this.unrun, this.pending.size);
      let cancelled: string[];
      try {
        cancelled = await findWorkflowIdsIfCancelled(this.deps.pool, batch);
      } catch (err) {
        this.deps.log.warn({ err, workflows: batch.length }, 'could not check cancellation wake-ups; the watchdog sweep will');
        continue;
      }
      if (cancelled.length > 0) this.deps.onCancelled(cancelled);
    }
  }
}
