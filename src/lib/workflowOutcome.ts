/** How a workflow ended, as its row states it (what `waitForWorkflow` resolves with). Pure. */
import type { EventWorkflowRow } from '../db/reads.js';

export interface WorkflowError {
  code: string;
  message: string;
  /** The step that failed it, when one did. */
  step?: string;
  details?: unknown;
}

export type WorkflowOutcome<Output = unknown> =
  | { workflowId: string; name: string; status: 'completed'; output: Output; completedAt: Date }
  | { workflowId: string; name: string; status: 'failed'; error: WorkflowError; completedAt: Date }
  | { workflowId: string; name: string; status: 'cancelled'; cancelledAt: Date };

/** The outcome a row states, or undefined while the workflow has not ended. */
export function workflowOutcomeOf(row: EventWorkflowRow): WorkflowOutcome | undefined {
  const base = { workflowId: String(row.id), name: row.name };
  const at = new Date(row.completed_at ?? row.cancelled_at ?? row.updated_at);
  switch (row.status) {
    case 'completed':
      return { ...base, status: 'completed', output: row.output ?? null, completedAt: at };
    case 'failed': {
      const e = row.error ?? { code: 'failed', message: 'the workflow failed' };
      const error: WorkflowError = { code: String(e.code), message: String(e.message) };
      if (typeof e.step === 'string') error.step = e.step;
      if (e.details !== undefined) error.details = e.details;
      return { ...base, status: 'failed', error, completedAt: at };
    }
    case 'cancelled':
      return { ...base, status: 'cancelled', cancelledAt: at };
    default:
      return undefined;
  }
}
