/**
 * `stepd status` of a workflow with sub-workflows: each child's view nested under the step that
 * started it, and every gate (and signal wait) waiting anywhere below listed with the parent's (so
 * a gate inside a child is approved from the parent's status). Pure: rows in, a view out.
 */
import type { StepRow, WorkflowRow } from '../../db/tables.js';
import { buildStatusView, type StatusView } from './statusView.js';

export interface WorkflowRows {
  workflow: WorkflowRow;
  steps: StepRow[];
}

/**
 * The view of `root` with its descendants (`below`: any order, each with its steps) attached:
 * `step.child` on the step whose `child_id` names them, and their waiting gates and signal waits
 * added to each ancestor's `waiting` and `signals` with their `workflowId`.
 */
export function buildStatusViewWithChildren(root: WorkflowRows, below: WorkflowRows[], now: Date = new Date()): StatusView {
  const byId = new Map(below.map((b) => [String(b.workflow.id), b]));
  const build = (rows: WorkflowRows, seen: Set<string>): StatusView => {
    const view = buildStatusView(rows.workflow, rows.steps, now);
    for (const step of view.steps) {
      const child = step.childId !== null ? byId.get(step.childId) : undefined;
      if (!child || seen.has(step.childId!)) continue;
      step.child = build(child, new Set([...seen, step.childId!]));
      for (const gate of step.child.waiting) view.waiting.push({ ...gate, workflowId: gate.workflowId ?? step.childId!, workflowName: gate.workflowName ?? child.workflow.name });
      for (const wait of step.child.signals) view.signals.push({ ...wait, workflowId: wait.workflowId ?? step.childId! });
    }
    return view;
  };
  return build(root, new Set([String(root.workflow.id)]));
}
