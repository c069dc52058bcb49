/**
 * What a flow says about who may do what: the tools it calls (a user may start it only if they
 * may call every one) and, for a gate, its `approval.approvers` and message. Pure.
 *
 * Gates are read from the flow JSON as stored (either form), not from the compiled flow, so an
 * `approvers` list is honoured whatever version of the flow language wrote it.
 */
import type { CompiledFlow } from '../flow/compiled.js';
import { normalizeFlow } from '../flow/spec.js';
import { matchesUserPattern } from '../security/actAs.js';

/** Every tool a compiled flow's steps call, sorted, each once. */
export function toolsCalledBy(flow: CompiledFlow): string[] {
  const tools = new Set<string>();
  for (const step of flow.steps.values()) if (step.tool) tools.add(step.tool);
  return [...tools].sort();
}

/** The registered flows a compiled flow's sub-workflow steps start (version null: the latest). */
export function subWorkflowsOf(flow: CompiledFlow): { name: string; version: number | null }[] {
  const refs = new Map<string, { name: string; version: number | null }>();
  for (const step of flow.steps.values()) {
    if (step.workflow) refs.set(`${step.workflow.name}@${step.workflow.version ?? ''}`, { name: step.workflow.name, version: step.workflow.version });
  }
  return [...refs.values()];
}

export interface GateInfo {
  /** Who may approve or reject it (patterns, `*` any characters); undefined: anyone. */
  approvers?: string[];
  /** What the gate asks, for whoever approves it (`approval.message`, else the step's description). */
  message?: string;
  /** The JSON Schema the approver's data must match (`approval.schema`), shown to the approver. */
  schema?: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The gate `stepName` of a stored flow; empty when the flow or step cannot be read. */
export function gateInfo(flowJson: unknown, stepName: string): GateInfo {
  const { flow } = normalizeFlow(flowJson);
  const steps = isObject(flow) && isObject(flow.steps) ? flow.steps : undefined;
  const step = steps && Object.hasOwn(steps, stepName) ? steps[stepName] : undefined;
  if (!isObject(step)) return {};
  const approval = isObject(step.approval) ? step.approval : {};
  const info: GateInfo = {};
  if (Array.isArray(approval.approvers)) info.approvers = approval.approvers.filter((a): a is string => typeof a === 'string');
  const message = typeof approval.message === 'string' ? approval.message : typeof step.description === 'string' ? step.description : undefined;
  if (message) info.message = message;
  if (isObject(approval.schema) || typeof approval.schema === 'boolean') info.schema = approval.schema;
  return info;
}

/** Whether `user` may approve or reject a gate with these approvers. */
export function mayApprove(gate: GateInfo, user: string): boolean {
  return gate.approvers === undefined || gate.approvers.some((p) => matchesUserPattern(p, user));
}
