/**
 * Whether a readying of a gate may stand (DESIGN.md 2b, "Inputs and gates"): the readier must be
 * one of the gate's `approval.approvers` and the database role that wrote the readying must be
 * allowed to act as that user (config `clients`, the rules of src/security/actAs.ts); the
 * approver's data must match `approval.schema` (a rejection, `"approved": false`, is not checked
 * against the schema). Pure: the database tells whether the role is trusted.
 */
import type { ClientsConfig } from '../configFile.js';
import type { ErrorData } from '../errors.js';
import { decideActingUser, matchesUserPattern } from '../security/actAs.js';
import type { CompiledStep } from './compiled.js';
import type { FlowIssue } from './spec.js';
import { compileFlow } from './validate.js';

export interface Readying {
  /** What the readier wrote into `result` (null: none, the gate reads `{"approved": true}`). */
  result: unknown;
  /** `readied_by`: the user the readying claims to be. */
  readiedBy: string | null;
  /** `readied_role`: the database role that wrote it (recorded by the database); null for the executor's own. */
  readiedRole: string | null;
  /** Whether that role may act as anyone (superuser, executor or owner member). */
  roleTrusted: boolean;
}

export const APPROVAL_REFUSED = 'approval_refused';

/** Whether the gate asks anything of a readying (approvers or a schema). */
export function gateChecksReadying(step: CompiledStep): boolean {
  return step.approval?.approvers !== undefined || step.approval?.schema !== undefined;
}

/** A rejection: `{"approved": false, …}`. */
export function isRejection(result: unknown): boolean {
  return typeof result === 'object' && result !== null && (result as { approved?: unknown }).approved === false;
}

/** Why `user` may not approve a gate with these approvers, or undefined when they may. */
export function approverProblem(approvers: readonly string[] | undefined, user: string | null): string | undefined {
  if (approvers === undefined) return undefined;
  if (user === null) return `the readying names no user (readied_by), and this gate may be approved only by ${approvers.join(', ')}`;
  if (approvers.some((p) => matchesUserPattern(p, user))) return undefined;
  return `user "${user}" is not among the approvers of this gate (${approvers.join(', ')})`;
}

/** The issues of the approver's data against the gate's schema (paths from `result`); none for a rejection. */
export function approvalDataIssues(step: CompiledStep, result: unknown): FlowIssue[] {
  const schema = step.approval?.schema;
  if (!schema || isRejection(result)) return [];
  return schema.check(result ?? { approved: true }, 'result');
}

/** The refusal of a readying, or undefined when it stands. */
export function refuseReadying(step: CompiledStep, r: Readying, clients: ClientsConfig | undefined): ErrorData | undefined {
  const details = { readiedBy: r.readiedBy, readiedRole: r.readiedRole };
  const approvers = step.approval?.approvers;
  const notApprover = approverProblem(approvers, r.readiedBy);
  if (notApprover) return { code: APPROVAL_REFUSED, message: `approval refused: ${notApprover}; the gate is waiting again`, details };
  if (approvers !== undefined && r.readiedBy !== null) {
    const acting = decideActingUser({ role: r.readiedRole, trusted: r.roleTrusted, createdBy: r.readiedBy }, clients);
    if (!acting.ok) {
      const why = clients?.[acting.details.role]?.actAs?.length ? 'its clients.actAs patterns do not match' : 'it has no "clients" entry, so it may act only as itself';
      return {
        code: APPROVAL_REFUSED,
        message: `approval refused: database role "${acting.details.role}" may not act as user "${acting.details.user}" (${why}); the gate is waiting again`,
        details,
      };
    }
  }
  const issues = approvalDataIssues(step, r.result);
  if (issues.length > 0) {
    const first = issues[0]!;
    return {
      code: APPROVAL_REFUSED,
      message: `approval refused: the data does not match the gate's approval.schema (${issues.length} issue(s)); first: ${first.path}: ${first.message}; the gate is waiting again`,
      issues,
      details,
    };
  }
  return undefined;
}

/**
 * The issues of an approver's data against the `approval.schema` of gate `stepName` in a stored
 * flow, for tools that ready gates (stepd approve, the MCP tools, the dashboard) to refuse up
 * front what the executor would refuse. Empty when the flow or step cannot be read or has no schema.
 */
export function approvalDataIssuesInFlow(flowJson: unknown, stepName: string, result: unknown): FlowIssue[] {
  const compiled = compileFlow(flowJson);
  const step = compiled.ok ? compiled.flow.steps.get(stepName) : undefined;
  return step?.kind === 'gate' ? approvalDataIssues(step, result) : [];
}
