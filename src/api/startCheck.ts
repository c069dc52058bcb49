/**
 * Before a workflow is stored: the flow is valid under the operator's caps, the input matches its
 * inputSchema, and the user may call every tool it calls, itself or through the registered flows
 * its sub-workflow steps start. Refusals are OperationErrors naming the flow (`what`).
 */
import type { Caps } from '../flow/caps.js';
import { DEFAULT_CAPS } from '../flow/caps.js';
import { loadFlowVersion } from '../db/queries/flows.js';
import type { Queryable } from '../db/queries/common.js';
import { inputSchemaProblem } from '../flow/jsonSchema.js';
import { compileFlow } from '../flow/validate.js';
import type { PermissionPolicy } from '../tools/permissions.js';
import { OperationError, inputMismatchMessage, invalidFlowMessage } from './errors.js';
import { subWorkflowsOf, toolsCalledBy } from './flowAccess.js';
import { checkFlowTools, type ToolLookupFactory } from '../tools/flowToolCheck.js';

export interface StartCheckDeps {
  pool: Queryable;
  permissions?: PermissionPolicy;
  caps?: Readonly<Caps>;
  /** The tools this process knows, to refuse unknown tools and literal arguments their schema refuses (as `stepd validate`). */
  toolLookup?: ToolLookupFactory;
}

export async function checkFlowForUser(deps: StartCheckDeps, user: string, start: { what: string; flow: unknown; input: unknown }): Promise<void> {
  const options = deps.caps ? { caps: deps.caps } : {};
  const compiled = compileFlow(start.flow, options);
  if (!compiled.ok) throw new OperationError('invalid_flow', invalidFlowMessage(start.what, compiled.issues), { details: { issues: compiled.issues } });
  const problem = inputSchemaProblem(compiled.flow.inputSchema, start.input);
  if (problem) throw new OperationError('invalid_input', inputMismatchMessage(start.what, problem.issues), { details: { issues: problem.issues } });
  if (deps.toolLookup) {
    const tools = await checkFlowTools(compiled.flow, deps.toolLookup());
    if (tools.issues.length > 0) throw new OperationError('invalid_flow', invalidFlowMessage(start.what, tools.issues), { details: { issues: tools.issues } });
  }
  const policy = deps.permissions;
  if (!policy || policy.allowsEverything) return;
  checkTools(policy, user, toolsCalledBy(compiled.flow));

  // The registered flows its sub-workflow steps start: breadth first, each version once, as deep
  // as caps.subWorkflowDepth. A child flow that is missing or invalid is not refused here: the
  // executor fails that step when it cannot start the child.
  const seen = new Set<string>();
  let level = subWorkflowsOf(compiled.flow);
  for (let depth = 0; level.length > 0 && depth < (deps.caps ?? DEFAULT_CAPS).subWorkflowDepth; depth++) {
    const next: { name: string; version: number | null }[] = [];
    for (const ref of level) {
      const row = await loadFlowVersion(deps.pool, ref.name, ref.version);
      if (!row || seen.has(`${row.name}@${row.version}`)) continue;
      seen.add(`${row.name}@${row.version}`);
      const child = compileFlow(row.flow, options);
      if (!child.ok) continue;
      checkTools(policy, user, toolsCalledBy(child.flow), `flow ${row.name}@${row.version}`);
      next.push(...subWorkflowsOf(child.flow));
    }
    level = next;
  }
}

/** `via` names the sub-workflow's flow when the tools are called through one. */
function checkTools(policy: PermissionPolicy, user: string, tools: string[], via?: string): void {
  const denied = tools.filter((t) => !policy.allows(user, t));
  if (denied.length === 0) return;
  throw new OperationError(
    'permission_denied',
    `user "${user}" may not call tool${denied.length > 1 ? 's' : ''} ${denied.map((t) => `"${t}"`).join(', ')}${via ? ` (called by the sub-workflow ${via})` : ''}; nothing was started`,
    { details: { user, tools: denied, ...(via ? { via } : {}) } },
  );
}

/** A flow given as JSON or as its text. */
export function parseFlowArg(flow: unknown): unknown {
  if (typeof flow !== 'string') return flow;
  try {
    return JSON.parse(flow);
  } catch (err) {
    throw new OperationError('invalid_flow', `the flow is not valid JSON: ${(err as Error).message}`, {
      details: { issues: [{ path: '', message: `flow is not valid JSON: ${(err as Error).message}` }] },
    });
  }
}

