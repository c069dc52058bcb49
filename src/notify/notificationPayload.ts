/**
 * What a webhook says (docs/operations.md, "Notifications"): built from the rows, never from a
 * NOTIFY. Pure: rows and the flow in, the JSON body out; the links' tokens are made by the caller.
 *
 *   {"id": "<outbox id>", "type": "step.waiting", "schema": "stepd", "at": "<ISO>",
 *    "workflow": {"id", "name", "user", "parentId"},
 *    "step": {"id", "name", "message", "approvers", "schema", "expiresAt"},
 *    "links": [{"user", "approve": "<url>", "reject": "<url>", "expiresAt"}]}        (approval.links)
 *   {"id", "type": "workflow.failed", "schema", "at", "workflow": {…}, "error": {"code", "message", "step"}}
 */
import { normalizeFlow } from '../flow/spec.js';
import type { NotifiedStep, NotifiedWorkflow } from '../db/queries/notifications.js';

export interface GateNotice {
  message?: string;
  approvers?: string[];
  /** approval.schema: what an approval's data must look like (an approve link sends none: {"approved": true}). */
  schema?: unknown;
  /** approval.links: true */
  links: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The gate `name` of a stored flow (either form), or undefined when that step is no approval gate
 * (a sub-workflow or signal wait, a flat-form step with a tool).
 */
export function gateOf(flowJson: unknown, name: string): GateNotice | undefined {
  const { flow, flat } = normalizeFlow(flowJson);
  const steps = isObject(flow) && isObject(flow.steps) ? flow.steps : undefined;
  const step = steps && Object.hasOwn(steps, name) ? steps[name] : undefined;
  if (!isObject(step)) return undefined;
  const waits = [step.tool, step.workflow, step.signal, step.wait].some((v) => v !== undefined && v !== null);
  if (waits || (step.approval === undefined && !flat)) return undefined;
  const approval = isObject(step.approval) ? step.approval : {};
  const notice: GateNotice = { links: approval.links === true };
  if (typeof approval.message === 'string') notice.message = approval.message;
  else if (typeof step.description === 'string') notice.message = step.description;
  if (Array.isArray(approval.approvers)) notice.approvers = approval.approvers.filter((a): a is string => typeof a === 'string');
  if (approval.schema !== undefined) notice.schema = approval.schema;
  return notice;
}

/** Who the links of a gate act as: each approver named literally; without approvers, the workflow's user. */
export function linkUsers(gate: GateNotice, workflowUser: string | null): string[] {
  if (gate.approvers === undefined) return workflowUser ? [workflowUser] : [];
  return [...new Set(gate.approvers.filter((a) => !a.includes('*')))];
}

export interface LinkPair {
  user: string;
  approve: string;
  reject: string;
  expiresAt: string;
}

function workflowPart(wf: NotifiedWorkflow) {
  return { id: String(wf.id), name: wf.name, user: wf.created_by, ...(wf.parent_id !== null ? { parentId: String(wf.parent_id) } : {}) };
}

export function waitingPayload(o: { id: string; schema: string; at: Date; wf: NotifiedWorkflow; step: NotifiedStep; gate: GateNotice; links?: LinkPair[] }) {
  const rendered = (o.step.args as { message?: unknown } | null)?.message;
  const message = typeof rendered === 'string' ? rendered : o.gate.message;
  return {
    id: o.id,
    type: 'step.waiting' as const,
    schema: o.schema,
    at: o.at.toISOString(),
    workflow: workflowPart(o.wf),
    step: {
      id: String(o.step.id),
      name: o.step.name,
      ...(message !== undefined ? { message } : {}),
      ...(o.gate.approvers !== undefined ? { approvers: o.gate.approvers } : {}),
      ...(o.gate.schema !== undefined ? { schema: o.gate.schema } : {}),
      expiresAt: o.step.expires_at ? new Date(o.step.expires_at).toISOString() : null,
    },
    ...(o.links ? { links: o.links } : {}),
  };
}

export function failedPayload(o: { id: string; schema: string; at: Date; wf: NotifiedWorkflow }) {
  const e = o.wf.error ?? {};
  return {
    id: o.id,
    type: 'workflow.failed' as const,
    schema: o.schema,
    at: o.at.toISOString(),
    workflow: workflowPart(o.wf),
    error: { code: e.code ?? 'unknown', message: e.message ?? '', ...(e.step !== undefined ? { step: e.step } : {}) },
  };
}
