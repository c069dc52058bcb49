/**
 * Sub-workflow steps, the executor's side (the pure part is src/flow/subWorkflow.ts, the
 * database's in sql/0011_subworkflows.sql).
 *
 *   start   A step's first attempt starts its child in the transaction that creates the step
 *           (startSubWorkflowStep, from Advance.createStep). A later attempt (a retry after its
 *           backoff, an attempt a redrive made) is created ready without a child; claimed like a
 *           timer, without a tool slot, it starts its child in a transaction of its own
 *           (startChildOfClaimedStep). Either way the step row becomes `pending` with `child_id`,
 *           and the child is a `new` workflows row admitted like any other.
 *   wait    Pending: no lease, no slot, nothing for the watchdog; clients cannot ready it (guard).
 *   settle  The child finishing readies the step with the child's outcome in the same
 *           transaction (a trigger); claimed without a slot, the step completes or fails from it
 *           (settledOutcome). If its executor dies right then, the step is handed back as ready
 *           (handBackSettlingSubWorkflowSteps), never failed as `lost`, which would rerun the child.
 */
import type pg from 'pg';
import { withTransaction } from '../../db/connect.js';
import {
  getParentDepthAndRegisteredFlow,
  insertChildWorkflowUnlessTooDeep,
  lockStepIfRunningUnder,
  lockWorkflows,
  type ClaimedStep,
  type NewStep,
  type Queryable,
} from '../../db/queries.js';
import { StepError } from '../../errors.js';
import { CapExceededError, DEFAULT_CAPS, valueCapError, type Caps } from '../../flow/caps.js';
import type { CompiledStep } from '../../flow/compiled.js';
import { ChildStartError, recordedInput, settledOutcome, subWorkflowRequest, type SubWorkflowRequest } from '../../flow/subWorkflow.js';
import type { TemplateScope } from '../../flow/templates.js';
import type { Logger } from '../../logger.js';
import type { Outcome } from '../core/txTypes.js';
import type { TxWriter } from '../core/txWriter.js';

export interface SubWorkflowDeps {
  schema: string;
  log: Logger;
  caps?: Readonly<Caps> | undefined;
}

/** A registered flow a child will run, checked against the depth cap. */
interface ChildPlan {
  name: string;
  version: number;
  flow: unknown;
  maxDepth: number;
}

/**
 * Looks up the flow a child runs and checks the depth: throws StepError `unknown_flow` (no such
 * flow or version; retryable, so the step's retry applies, then its onError) or `cap_exceeded`
 * (the child would be deeper than caps.subWorkflowDepth, or its tree would have more child
 * workflows than caps.subWorkflows; not retryable).
 */
async function planChild(db: Queryable, parentId: string, request: SubWorkflowRequest, caps: Readonly<Caps> | undefined): Promise<ChildPlan> {
  const maxDepth = (caps ?? DEFAULT_CAPS).subWorkflowDepth;
  // Its admission would refuse it anyway; refused here, it never reaches the database's size ceiling (sql/0017).
  const tooBig = valueCapError(`the input of sub-workflow "${request.workflow}"`, request.input, 'inputBytes', caps ?? DEFAULT_CAPS);
  if (tooBig) throw new CapExceededError(tooBig.message, tooBig.details as { cap: string; limit: number; actual?: number });
  const found = await getParentDepthAndRegisteredFlow(db, { parentId, name: request.workflow, version: request.version });
  if (!found) throw new StepError('internal', `workflow ${parentId} not found while starting a sub-workflow`);
  const maxChildren = (caps ?? DEFAULT_CAPS).subWorkflows;
  if (found.treeChildren + 1 > maxChildren) {
    throw new CapExceededError(
      `sub-workflow "${request.workflow}" would be child workflow ${found.treeChildren + 1} of its top-level workflow, above the operator's cap caps.subWorkflows (${maxChildren})`,
      { cap: 'subWorkflows', limit: maxChildren, actual: found.treeChildren + 1 },
    );
  }
  if (found.parentDepth + 1 > maxDepth) {
    throw new CapExceededError(
      `sub-workflow "${request.workflow}" would be nested ${found.parentDepth + 1} deep, above the operator's cap caps.subWorkflowDepth (${maxDepth})`,
      { cap: 'subWorkflowDepth', limit: maxDepth, actual: found.parentDepth + 1 },
    );
  }
  if (!found.flow) {
    const name = request.workflow.slice(0, 200);
    const message =
      found.latest === null
        ? `no flow named "${name}" is registered (store one with: stepd flow put FILE --name ${name})`
        : `flow "${name}" has no version ${request.version} (its latest version is ${found.latest})`;
    // Retryable: a flow registered meanwhile (a deploy in progress) lets the step's next attempt start it.
    throw new StepError('unknown_flow', message, { retryable: true, details: { name, version: request.version, latest: found.latest } });
  }
  return { name: request.workflow, version: found.flow.version, flow: found.flow.flow, maxDepth };
}

async function insertChild(db: Queryable, deps: SubWorkflowDeps, parentId: string, stepId: string, plan: ChildPlan, input: Record<string, unknown>): Promise<string> {
  const r = await insertChildWorkflowUnlessTooDeep(db, { parentId, stepId, name: plan.name, flow: plan.flow, version: plan.version, input, maxDepth: plan.maxDepth, schema: deps.schema });
  // planChild checked the depth under the parent's row lock, and a depth never changes.
  if (r.childId === null) throw new Error(`sub-workflow of step ${stepId} refused at depth ${r.parentDepth + 1}`);
  deps.log.info({ workflowId: parentId, stepId, childId: r.childId, flow: plan.name, version: plan.version, depth: r.depth }, 'sub-workflow started');
  return r.childId;
}

/**
 * The first attempt of a sub-workflow step, inside the transaction that creates it (the parent's
 * row is locked): resolve the input, find the flow, insert the step pending and its child. A
 * StepError thrown before the row exists (bad input, unknown flow, too deep) fails the step as
 * any step that cannot be created.
 */
export async function startSubWorkflowStep(
  ctx: { db: Queryable; writer: TxWriter; deps: SubWorkflowDeps },
  step: CompiledStep,
  base: Omit<NewStep, 'args' | 'status'>,
  scope: TemplateScope,
): Promise<void> {
  const request = subWorkflowRequest(step, scope);
  let plan: ChildPlan;
  try {
    plan = await planChild(ctx.db, base.workflowId, request, ctx.deps.caps);
  } catch (err) {
    throw err instanceof StepError ? new ChildStartError(err, request) : err;
  }
  const stepId = await ctx.writer.insertNow({ ...base, args: request, status: 'pending' });
  await insertChild(ctx.db, ctx.deps, base.workflowId, stepId, plan, request.input);
}

export interface ClaimedSubWorkflowDeps extends SubWorkflowDeps {
  pool: pg.Pool;
  executorId: string;
}

/**
 * A claimed sub-workflow step. Settling (child_id set): the child's outcome. Starting (no child
 * yet: a retry or a redriven attempt): starts the child in a transaction fenced on the step
 * still running under this executor, and returns undefined — the step waits, nothing to record —
 * or the failure when the child cannot start (unknown flow, too deep).
 */
export async function runClaimedSubWorkflowStep(deps: ClaimedSubWorkflowDeps, row: ClaimedStep, step: CompiledStep): Promise<Outcome | undefined> {
  if (row.child_id !== null) return settledOutcome(row.result);
  const spec = step.workflow;
  if (!spec) return { status: 'failed', error: { code: 'bad_step', message: `step "${row.name}" is not a sub-workflow step`, retryable: false } };
  // The flow says which workflow; the row recorded the input its first attempt resolved.
  const input = recordedInput(row.args);
  if (!input) {
    const message = `step "${row.name}" has no recorded input for its sub-workflow (its workflow.input could not be resolved when the step was created)`;
    return { status: 'failed', error: { code: 'invalid_input', message, retryable: false } };
  }
  const request: SubWorkflowRequest = { workflow: spec.name, version: spec.version, input };
  try {
    return await withTransaction(deps.pool, async (client) => {
      const [parent] = await lockWorkflows(client, [row.workflow_id]);
      if (!parent || parent.status !== 'running') return undefined;
      if (!(await lockStepIfRunningUnder(client, { stepId: row.id, executorId: deps.executorId }))) return undefined;
      const plan = await planChild(client, row.workflow_id, request, deps.caps);
      await insertChild(client, deps, row.workflow_id, row.id, plan, request.input);
      return undefined;
    });
  } catch (err) {
    if (err instanceof StepError) return { status: 'failed', error: { ...err.toJSON(), retryable: err.retryable } };
    // The database failed us: the attempt fails retryably, and its retry starts the child.
    deps.log.warn({ err, workflowId: row.workflow_id, stepId: row.id }, 'could not start a sub-workflow');
    return { status: 'failed', error: { code: 'sub_workflow_start_failed', message: `could not start sub-workflow "${spec.name}": ${(err as Error).message}`, retryable: true } };
  }
}
