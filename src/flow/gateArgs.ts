/**
 * What a waiting gate shows whoever may approve it, stored in the gate row's `args` (so SQL,
 * `stepd status`, the `step.waiting` event and other tools read the same): its `approval.message`
 * rendered when the gate starts waiting, and its `approval.approvers`. Pure.
 */
import type { CompiledStep } from './compiled.js';
import { resolveTemplates, type TemplateScope } from './templates.js';

/** A rendered message longer than this is cut (it travels in a NOTIFY payload). */
export const MAX_GATE_MESSAGE_CHARS = 2_000;

export interface GateArgs {
  message?: string;
  approvers?: string[];
}

/** The gate row's args, or null when the gate has neither a message nor approvers. Throws TemplateError. */
export function renderGateArgs(step: CompiledStep, scope: TemplateScope): GateArgs | null {
  const approval = step.approval;
  if (!approval || (approval.message === undefined && approval.approvers === undefined)) return null;
  const args: GateArgs = {};
  if (approval.message !== undefined) {
    const value = resolveTemplates(approval.message, scope);
    const text = typeof value === 'string' ? value : JSON.stringify(value) ?? String(value);
    args.message = text.length > MAX_GATE_MESSAGE_CHARS ? `${text.slice(0, MAX_GATE_MESSAGE_CHARS)}…` : text;
  }
  if (approval.approvers !== undefined) args.approvers = approval.approvers;
  return args;
}
