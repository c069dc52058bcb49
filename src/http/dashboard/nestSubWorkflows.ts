/**
 * The workflows list with sub-workflows nested: each top-level row is followed by its
 * sub-workflows, depth first, oldest child first, each with its depth (the list indents it). A
 * child whose parent is not among the rows (more than the limit were read) goes under its
 * nearest listed ancestor, or is left out. Pure.
 */
import type { WorkflowSummaryView } from '../../api/views/workflowSummary.js';

export interface NestedRow extends WorkflowSummaryView {
  /** 0 for a top-level workflow, 1 for its children, and so on. */
  depth: number;
}

export function nestSubWorkflows(top: readonly WorkflowSummaryView[], below: readonly WorkflowSummaryView[]): NestedRow[] {
  const children = new Map<string, WorkflowSummaryView[]>();
  for (const c of [...below].sort((a, b) => Number(a.id) - Number(b.id))) {
    if (c.parentId === null) continue;
    const list = children.get(c.parentId) ?? [];
    list.push(c);
    children.set(c.parentId, list);
  }
  const out: NestedRow[] = [];
  const seen = new Set<string>();
  const walk = (w: WorkflowSummaryView, depth: number) => {
    if (seen.has(w.id)) return;
    seen.add(w.id);
    out.push({ ...w, depth });
    for (const c of children.get(w.id) ?? []) walk(c, depth + 1);
  };
  for (const w of top) walk(w, 0);
  return out;
}
