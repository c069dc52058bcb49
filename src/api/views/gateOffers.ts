/**
 * What `stepd status` offers for each waiting gate: the approve and reject commands only to a
 * user the gate's `approval.approvers` admit (anyone else is told who may, instead of a command
 * that would be refused), the `approval.schema` the approver's data must match, and, for a gate
 * inside a sub-workflow, which child it belongs to. The approvers rule is the one `stepd approve`
 * and the daemon apply (src/flow/approvalCheck.ts); whether the caller's database role may act as
 * the user (config `clients`) is the daemon's to know and is not predicted here. Pure.
 */
import { gateInfo, mayApprove } from '../flowAccess.js';
import { compactJson, formatError } from './format.js';
import type { StatusView } from './statusView.js';

type WaitingGate = StatusView['waiting'][number];

/** Fills `mayApprove` and `schema` of every waiting gate from its workflow's flow (`flowOf(undefined)`: the root's). */
export function annotateGateOffers(view: StatusView, flowOf: (workflowId: string | undefined) => unknown, user: string): void {
  const notYours = new Set<string>();
  for (const w of view.waiting) {
    const gate = gateInfo(flowOf(w.workflowId), w.name);
    const approvers = w.approvers ?? gate.approvers;
    if (approvers !== undefined) w.approvers = approvers;
    w.mayApprove = mayApprove(approvers !== undefined ? { approvers } : {}, user);
    if (!w.mayApprove) notYours.add(w.stepId);
    if (gate.schema !== undefined) w.schema = gate.schema;
  }
  // The tree's line of such a gate offers no command either.
  const walk = (v: StatusView) => {
    for (const step of v.steps) {
      if (notYours.has(step.id)) delete step.approve;
      if (step.child) walk(step.child);
    }
  };
  if (notYours.size > 0) walk(view);
}

/** The lines about the waiting gates, after the tree. */
export function renderWaitingGates(waiting: readonly WaitingGate[]): string[] {
  const lines: string[] = [];
  for (const w of waiting) {
    const where = w.workflowId !== undefined ? ` in sub-workflow ${w.workflowId}${w.workflowName !== undefined ? ` (${w.workflowName})` : ''}` : '';
    if (w.mayApprove === false) {
      lines.push(`waiting: step ${w.stepId} (${w.name})${where} — for one of its approvers; you may not approve or reject it`);
    } else {
      lines.push(`waiting: step ${w.stepId} (${w.name})${where} — approve: ${w.approve}   reject: ${w.reject}`);
    }
    if (w.message !== undefined) lines.push(`  message: ${w.message}`);
    if (w.approvers !== undefined) lines.push(`  approvers: ${w.approvers.join(', ')}`);
    if (w.schema !== undefined && w.mayApprove !== false) {
      lines.push(`  approval.schema (approve with --data '{…}' matching it): ${compactJson(w.schema, 1_000)}`);
    }
    if (w.refused) {
      lines.push(`  refused: ${formatError(w.refused)}`);
      const issues = (w.refused as { issues?: unknown }).issues;
      if (Array.isArray(issues)) for (const i of issues as { path?: string; message?: string }[]) lines.push(`    ${i.path}: ${i.message}`);
    }
  }
  return lines;
}
