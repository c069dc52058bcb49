/** JSON views of rows for the operations' answers (the same fields as `stepd list --json`). */
import { between } from './format.js';
import type { WorkflowSummary } from '../../db/reads.js';

export interface WorkflowSummaryView {
  id: string;
  name: string;
  status: WorkflowSummary['status'];
  createdBy: string | null;
  key: string | null;
  createdAt: string;
  durationMs: number | null;
  steps: number;
  /** Gates waiting for approval, in the workflow and its sub-workflows. */
  waiting: number;
  /** A sub-workflow's parent. */
  parentId: string | null;
  /** A fork's source workflow (sql/0031). */
  forkedFrom: string | null;
  error: unknown;
}

export function toWorkflowSummary(r: WorkflowSummary, now: Date): WorkflowSummaryView {
  const end = r.completed_at ?? r.cancelled_at ?? (r.status === 'running' ? now : null);
  return {
    id: String(r.id),
    name: r.name,
    status: r.status,
    createdBy: r.created_by,
    key: r.key,
    createdAt: new Date(r.created_at).toISOString(),
    durationMs: between(r.started_at, end) ?? null,
    steps: r.step_count,
    waiting: r.waiting,
    parentId: r.parent_id === null || r.parent_id === undefined ? null : String(r.parent_id),
    forkedFrom: r.forked_from === null || r.forked_from === undefined ? null : String(r.forked_from),
    error: r.error,
  };
}
