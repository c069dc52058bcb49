/**
 * Forking a workflow as a user (the MCP tool fork_workflow, the dashboard's fork button; `stepd
 * fork` calls the same SQL on the caller's own role): a new workflow with the source's frozen
 * flow that keeps the results of the steps before `fromStep` (some replaced if asked) and runs
 * from there (sql/0031). Checked here first, as cancel and retry are: the workflow's own user
 * or an admin only, and a gate's result replaced only by a user its approvers name (the daemon's
 * role is trusted, so the database would let it through).
 */
import type pg from 'pg';
import type { Kysely } from 'kysely';
import { forkWorkflowAsRole } from '../db/queries/fork.js';
import { getWorkflow } from '../db/reads.js';
import type { Database } from '../db/tables.js';
import { gateOf } from '../notify/notificationPayload.js';
import { forkStartProblem } from '../flow/forkStart.js';
import { compileFlow } from '../flow/validate.js';
import { OperationError, parseIdOrFail, workflowNotFoundMessage } from './errors.js';
import { gateInfo, mayApprove } from './flowAccess.js';

export interface ForkWorkflowInput {
  workflowId: string | number;
  /** The step to run from (default: the flow's start). */
  fromStep?: string;
  /** The fork's input (default: the source's). */
  input?: unknown;
  /** Results of steps before fromStep to use instead of the recorded ones: {"step": value}. */
  results?: unknown;
}

export interface ForkedWorkflow {
  workflowId: string;
  forkedFrom: string;
  fromStep: string | null;
  name: string;
}

export interface ForkDeps {
  pool: pg.Pool;
  db: Kysely<Database>;
  schema: string;
  admins?: readonly string[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export async function forkWorkflowAsUser(deps: ForkDeps, user: string, args: ForkWorkflowInput): Promise<ForkedWorkflow> {
  const id = parseIdOrFail(args.workflowId, 'workflow id');
  const fromStep = args.fromStep === undefined || args.fromStep === '' ? null : args.fromStep;
  if (fromStep !== null && typeof fromStep !== 'string') throw new OperationError('invalid_input', `fromStep must be a step name (got ${JSON.stringify(fromStep)})`);
  if (args.input !== undefined && !isObject(args.input)) throw new OperationError('invalid_input', `input must be a JSON object (got ${JSON.stringify(args.input)})`);
  if (args.results !== undefined && !isObject(args.results)) throw new OperationError('invalid_input', `results must be a JSON object {"step": result} (got ${JSON.stringify(args.results)})`);
  const results = args.results === undefined ? null : args.results;
  if (results && Object.keys(results).length > 0 && fromStep === null) throw new OperationError('invalid_input', 'results can be given only with fromStep (the step the fork runs from)');

  const wf = await getWorkflow(deps.db, id);
  if (!wf) throw new OperationError('not_found', workflowNotFoundMessage(id, deps.schema));
  if (wf.created_by !== user && !(deps.admins ?? []).includes(user)) {
    const owner = wf.created_by === null ? 'no user' : `user "${wf.created_by}"`;
    throw new OperationError('permission_denied', `user "${user}" may not fork workflow ${wf.id} (${wf.name}): it was started by ${owner}; only its own user or an admin (config api.admins) may fork it`, {
      details: { user, createdBy: wf.created_by },
    });
  }
  const problem = fromStep === null ? undefined : forkProblemOf(wf.flow, fromStep);
  if (problem) throw new OperationError('refused', `workflow ${wf.id} cannot be forked from there: ${problem}; nothing was started`);
  for (const name of Object.keys(results ?? {})) {
    if (gateOf(wf.flow, name) === undefined) continue;
    const gate = gateInfo(wf.flow, name);
    if (gate.approvers === undefined || !mayApprove(gate, user)) {
      throw new OperationError('permission_denied', `user "${user}" may not replace the result of gate "${name}" in a fork: ${gate.approvers ? `its approvers are ${gate.approvers.join(', ')}` : 'a gate\'s answer is its approver\'s'}; fork from the gate instead so it asks again`, {
        details: { user, step: name, approvers: gate.approvers },
      });
    }
  }
  const newId = await forkWorkflowAsRole(deps.pool, { sourceId: id, fromStep, input: (args.input as Record<string, unknown> | undefined) ?? null, results });
  return { workflowId: newId, forkedFrom: String(wf.id), fromStep, name: wf.name };
}

/** Why a fork of a stored flow cannot run from `step` (forkStart.ts), or undefined (also when the flow no longer compiles: the database and the executor decide then). */
export function forkProblemOf(flowJson: unknown, step: string): string | undefined {
  if (flowJson === null || flowJson === undefined) return undefined;
  const compiled = compileFlow(flowJson);
  return compiled.ok ? forkStartProblem(compiled.flow, step) : undefined;
}
