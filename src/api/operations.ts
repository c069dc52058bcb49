/**
 * The workflow operations as a given user, for the MCP server and the dashboard: each writes
 * exactly what the SQL contract allows (src/db/contract.ts) on a client connection, so the
 * database's guards apply and record who wrote. The user is the caller's name: it becomes a new
 * workflow's `created_by` (the user its steps run as) and an approval's `readied_by`.
 *
 * Permissions, checked here before writing: a user may start only a flow whose tools they may
 * all call (config `permissions`), and may approve or reject a gate only when its
 * `approval.approvers` (if any) name them. Errors are OperationErrors with the CLI's wording.
 */
import { buildStatusViewWithChildren } from './views/subWorkflowTree.js';
import { missingFlowMessage } from './missingFlowMessage.js';
import { cancelWorkflowIfActive, insertWorkflow, readyPendingStep, redriveWorkflowIfFailed } from '../db/contract.js';
import { listFlowsLatest, loadFlowVersion } from '../db/queries/flows.js';
import { listSchedules } from '../db/queries/schedules.js';
import { scheduleListing, type ScheduleListing } from './views/scheduleView.js';
import { getStepWithWorkflow, getSubWorkflowTree, getWorkflow, getWorkflowByKey, getWorkflowSteps, listWorkflows as listWorkflowRows } from '../db/reads.js';
import type { WorkflowRow, WorkflowStatus } from '../db/tables.js';
import { checkRedrive } from '../executor/transitions/redriveCheck.js';
import { DEFAULT_CAPS, admissionProblem, type Caps } from '../flow/caps.js';
import { flowNameProblem } from '../flow/flowName.js';
import { compileFlow } from '../flow/validate.js';
import { approvalDataIssuesInFlow } from '../flow/approvalCheck.js';
import type { ToolInfo } from '../tools/tool.js';
import {
  OperationError,
  toOperationError,
  cannotRedriveMessage,
  keyTakenMessage,
  notYourWorkflowMessage,
  parseIdOrFail,
  stepNotFoundMessage,
  stepNotPendingMessage,
  workflowNotActiveMessage,
  workflowNotFailedMessage,
  workflowNotFoundMessage,
} from './errors.js';
import { refuseUnlessRoleActsAs } from './actingUser.js';
import { gateInfo, mayApprove } from './flowAccess.js';
import { checkFlowForUser, parseFlowArg } from './startCheck.js';
import { validateFlowAndTools } from './validateFlowAndTools.js';
import { checkSignal, insertSignalOrExplain, refuseSignalWait } from './signalSending.js';
import { refuseWorkerStep } from './workerStepRefusal.js';
import { toWorkflowSummary, type WorkflowSummaryView } from './views/workflowSummary.js';
import { forkWorkflowAsUser, type ForkWorkflowInput, type ForkedWorkflow } from './forkOperation.js';
import { bulkAsUser, type BulkInput } from './bulkOperation.js';
import type { BulkResult } from './bulkActions.js';
import type { OperationsDeps } from './operationsDeps.js';
import type { ReadiedStep, SendSignalInput, SentSignal, StartWorkflowInput, StartedWorkflow, ValidationResult, WaitingGate, WorkflowDetails } from './operationTypes.js';

export type { ReadiedStep, SendSignalInput, SentSignal, StartWorkflowInput, StartedWorkflow, ValidationResult, WaitingGate, WaitingSignal, WorkflowDetails } from './operationTypes.js';

export { toOperationError };

export const WORKFLOW_STATUSES: readonly WorkflowStatus[] = ['new', 'running', 'completed', 'failed', 'cancelled'];
export const DEFAULT_LIST_LIMIT = 20;
export const MAX_LIST_LIMIT = 1000;

export class Operations {
  readonly #deps: OperationsDeps;

  constructor(deps: OperationsDeps) {
    this.#deps = deps;
  }

  /** Inserts a workflow as `user` (its created_by), after validating the flow and the user's tool permissions. */
  async startWorkflow(user: string, args: StartWorkflowInput): Promise<StartedWorkflow> {
    const name = typeof args.name === 'string' ? args.name.trim() : '';
    if (!name) throw new OperationError('invalid_input', 'name must not be empty');
    const input = args.input === undefined ? {} : args.input;
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      throw new OperationError('invalid_input', `input must be a JSON object, like {"topic": "AI safety"} (got ${JSON.stringify(input)})`);
    }
    // What admission would refuse (a name PostgreSQL cannot carry, an input over the caps) is refused here, before anything is stored.
    const problem = admissionProblem(name, input, this.#deps.caps ?? DEFAULT_CAPS);
    if (problem) throw new OperationError('invalid_input', `${problem.message}; nothing was started`, { details: problem });
    const inline = args.flow !== undefined && args.flow !== null;
    if (inline && args.version !== undefined) throw new OperationError('invalid_input', 'give either a flow or the version of a registered flow, not both');
    if (args.version !== undefined && (!Number.isSafeInteger(args.version) || args.version < 1)) {
      throw new OperationError('invalid_input', `version must be a whole number from 1 (got ${JSON.stringify(args.version)})`);
    }
    const flow = inline ? parseFlowArg(args.flow) : null;
    const lookAlike = inline ? undefined : flowNameProblem(name);
    if (lookAlike) throw new OperationError('invalid_input', `flow name ${JSON.stringify(name)} refused: ${lookAlike}; nothing was started`);

    return this.#db(async () => {
      if (inline) await checkFlowForUser(this.#startDeps(), user, { what: 'the flow', flow, input });
      // A registered flow is checked as it will run: the version checked is the version pinned.
      let flowVersion: number | null = null;
      if (!inline) {
        const row = await loadFlowVersion(this.#deps.pool, name, args.version ?? null);
        if (!row) throw new OperationError('not_found', `${await missingFlowMessage(this.#deps.pool, name, args.version ?? null)}; nothing was started`);
        await checkFlowForUser(this.#startDeps(), user, { what: `flow ${name}@${row.version}`, flow: row.flow, input });
        flowVersion = row.version;
      }
      if (this.#deps.actAs) await refuseUnlessRoleActsAs(this.#deps.pool, this.#deps.actAs.clients, user, { doing: 'start workflows', consequence: 'nothing was started' });
      const key = args.key === undefined || args.key === '' ? null : args.key;
      const created = await insertWorkflow(this.#deps.pool, { name, flow, flowVersion, input: input as Record<string, unknown>, createdBy: user, key });
      if (created) return { workflowId: String(created.id), name: created.name, status: created.status, created: true };
      const existing = await getWorkflowByKey(this.#deps.db, key!);
      if (!existing) throw new OperationError('refused', keyTakenMessage(key!));
      return { workflowId: String(existing.id), name: existing.name, status: existing.status, created: false };
    });
  }

  /** A workflow, its steps (every attempt) and the gates waiting for someone. */
  async getWorkflow(user: string, args: { workflowId: string | number }): Promise<WorkflowDetails> {
    const id = parseIdOrFail(args.workflowId, 'workflow id');
    return this.#db(async () => {
      const wf = await getWorkflow(this.#deps.db, id);
      if (!wf) throw new OperationError('not_found', workflowNotFoundMessage(id, this.#deps.schema));
      // Sub-workflows nest under their steps; their waiting gates are listed with the parent's.
      const below = await getSubWorkflowTree(this.#deps.db, id);
      const view = buildStatusViewWithChildren({ workflow: wf, steps: await getWorkflowSteps(this.#deps.db, id) }, below);
      const flows = new Map(below.map((b) => [String(b.workflow.id), b.workflow.flow]));
      const waiting = view.waiting.map((w): WaitingGate => {
        // The gate row's args (its message rendered when it started waiting) say it best; the flow is the fallback.
        const gate = gateInfo(w.workflowId !== undefined ? flows.get(w.workflowId) : wf.flow, w.name);
        const message = w.message ?? gate.message;
        const approvers = w.approvers ?? gate.approvers;
        return {
          stepId: w.stepId,
          name: w.name,
          ...(w.workflowId !== undefined ? { workflowId: w.workflowId } : {}),
          ...(w.workflowName !== undefined ? { workflowName: w.workflowName } : {}),
          ...(message !== undefined ? { message } : {}),
          ...(approvers !== undefined ? { approvers } : {}),
          mayApprove: mayApprove({ ...(approvers !== undefined ? { approvers } : {}) }, user),
          ...(gate.schema !== undefined ? { schema: gate.schema } : {}),
          ...(w.refused !== undefined ? { refused: w.refused } : {}),
          since: w.since,
          expiresAt: w.expiresAt,
        };
      });
      return { workflow: view.workflow, steps: view.steps, waiting, signals: view.signals };
    });
  }

  /**
   * Sends a signal (the SQL contract's `INSERT INTO signals (name, key, payload)`) on this pool's
   * database role, which the database stamps as its created_role; the steps waiting for it are
   * readied in the same transaction. Checked first and refused as in signalSending.ts.
   */
  async sendSignal(user: string, args: SendSignalInput): Promise<SentSignal> {
    const signal = checkSignal(user, args, this.#deps);
    return this.#db(() => insertSignalOrExplain(this.#deps.pool, this.#deps.schema, signal));
  }

  /** Recent workflows, newest first. */
  async listWorkflows(_user: string, args: { status?: string; name?: string; createdBy?: string; limit?: number } = {}): Promise<WorkflowSummaryView[]> {
    const status = args.status as WorkflowStatus | undefined;
    if (status !== undefined && !WORKFLOW_STATUSES.includes(status)) {
      throw new OperationError('invalid_input', `status must be one of ${WORKFLOW_STATUSES.join(', ')} (got ${JSON.stringify(args.status)})`);
    }
    const limit = args.limit ?? DEFAULT_LIST_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new OperationError('invalid_input', `limit must be a whole number from 1 to ${MAX_LIST_LIMIT} (got ${JSON.stringify(args.limit)})`);
    }
    return this.#db(async () => {
      const rows = await listWorkflowRows(this.#deps.db, { limit, ...(status ? { status } : {}), ...(args.name ? { name: args.name } : {}), ...(args.createdBy ? { createdBy: args.createdBy } : {}) });
      const now = new Date();
      return rows.map((r) => toWorkflowSummary(r, now));
    });
  }

  /** Approves a waiting gate as `user` (readied_by); `data` becomes its result (default {"approved": true}). */
  async approveStep(user: string, args: { stepId: string | number; data?: unknown }): Promise<ReadiedStep> {
    return this.#ready(user, parseIdOrFail(args.stepId, 'step id'), 'approved', args.data);
  }

  /** Rejects a waiting gate as `user`: its result is {"approved": false, "reason": …} and it fails with code "rejected". */
  async rejectStep(user: string, args: { stepId: string | number; reason?: string; data?: unknown }): Promise<ReadiedStep> {
    return this.#ready(user, parseIdOrFail(args.stepId, 'step id'), 'rejected', rejection(args.data, args.reason));
  }

  /** Cancels a workflow that is new or running; its live steps are cancelled and running tools aborted. */
  async cancelWorkflow(user: string, args: { workflowId: string | number }): Promise<{ workflowId: string; name: string; status: WorkflowStatus; cancelledAt: string | null }> {
    const id = parseIdOrFail(args.workflowId, 'workflow id');
    return this.#db(async () => {
      await this.#refuseUnlessActive(id, user);
      const wf = await cancelWorkflowIfActive(this.#deps.pool, id);
      if (!wf) {
        await this.#refuseUnlessActive(id, user);
        throw new OperationError('refused', `workflow ${id} could not be cancelled`);
      }
      return { workflowId: String(wf.id), name: wf.name, status: wf.status, cancelledAt: wf.cancelled_at ? new Date(wf.cancelled_at).toISOString() : null };
    });
  }

  /**
   * Redrives a failed workflow (the SQL contract's `SET status = 'running' … AND status = 'failed'`):
   * the daemon gives its failed steps new attempts, or refuses and fails it again with code
   * `redrive_refused`. Checked here first the way the daemon checks, so most refusals say why at once.
   */
  async retryWorkflow(
    user: string,
    args: { workflowId: string | number },
  ): Promise<{ workflowId: string; name: string; status: WorkflowStatus; redrives: number; redriveRequestedAt: string | null }> {
    const id = parseIdOrFail(args.workflowId, 'workflow id');
    return this.#db(async () => {
      await this.#refuseUnlessRedrivable(id, user);
      const wf = await redriveWorkflowIfFailed(this.#deps.pool, id);
      if (!wf) {
        await this.#refuseUnlessRedrivable(id, user);
        throw new OperationError('refused', `workflow ${id} could not be redriven`);
      }
      return {
        workflowId: String(wf.id),
        name: wf.name,
        status: wf.status,
        redrives: wf.redrives,
        redriveRequestedAt: wf.redrive_requested_at ? new Date(wf.redrive_requested_at).toISOString() : null,
      };
    });
  }

  /** Forks a workflow (sql/0031): its own user or an admin only; see forkOperation.ts. */
  async forkWorkflow(user: string, args: ForkWorkflowInput): Promise<ForkedWorkflow> {
    return this.#db(() => forkWorkflowAsUser(this.#deps, user, args));
  }

  /** Cancels or retries every workflow a filter picks, or lists them (dryRun); see bulkOperation.ts. */
  async bulkWorkflows(user: string, args: BulkInput): Promise<BulkResult> {
    return this.#db(() => bulkAsUser(this.#deps, user, args));
  }

  /** Checks a flow the way `stepd validate` does (with the tools this process knows); every issue with its path. No database needed. */
  validateFlow(_user: string, args: { flow: unknown }): Promise<ValidationResult> {
    return validateFlowAndTools(args.flow, this.#caps(), this.#deps.toolLookup);
  }

  /** The registered flows, by name, each with its latest version. */
  async listFlows(_user: string): Promise<{ flows: { name: string; version: number; versions: number; createdAt: string; createdBy: string | null }[] }> {
    return this.#db(async () => {
      const rows = await listFlowsLatest(this.#deps.pool);
      return { flows: rows.map((r) => ({ name: r.name, version: r.version, versions: r.versions, createdAt: new Date(r.created_at).toISOString(), createdBy: r.created_by })) };
    });
  }

  /** The schedules, by name, each with its next tick (as `stepd schedule list --json`). */
  async listSchedules(_user: string): Promise<{ schedules: ScheduleListing[] }> {
    return this.#db(async () => ({ schedules: (await listSchedules(this.#deps.pool)).map(scheduleListing) }));
  }

  /**
   * The tools `user` may call, and nothing of the others: a server none of whose tools the user
   * may call is not asked, and its failures are not shown (its description or error could carry
   * what the user is not meant to see). `allowed` is always true (kept for older clients).
   */
  async listTools(user: string): Promise<{ tools: (ToolInfo & { allowed: true })[]; failures: { server: string; error: string }[] }> {
    if (!this.#deps.listTools) return { tools: [], failures: [] };
    const policy = this.#deps.permissions;
    const mayAsk = (prefix: string): boolean => policy?.allowsSomeToolOf(user, prefix) ?? true;
    const listed = await this.#deps.listTools(mayAsk);
    return {
      tools: listed.tools.filter((t) => policy?.allows(user, t.name) ?? true).map((t) => ({ ...t, allowed: true as const })),
      failures: (listed.failures ?? []).filter((f) => mayAsk(f.server)),
    };
  }

  // -------------------------------------------------------------------------------------------

  #caps(): { caps?: Readonly<Caps> } {
    return this.#deps.caps ? { caps: this.#deps.caps } : {};
  }

  #startDeps() {
    return { pool: this.#deps.pool, ...(this.#deps.permissions ? { permissions: this.#deps.permissions } : {}), ...(this.#deps.caps ? { caps: this.#deps.caps } : {}), ...(this.#deps.toolLookup ? { toolLookup: this.#deps.toolLookup } : {}) };
  }

  async #ready(user: string, id: string, verb: 'approved' | 'rejected', result: unknown): Promise<ReadiedStep> {
    return this.#db(async () => {
      const step = await this.#refuseUnlessPending(id, verb);
      const wf = await getWorkflow(this.#deps.db, step.workflow_id);
      const gate = gateInfo(wf?.flow, step.name);
      if (!mayApprove(gate, user)) {
        throw new OperationError(
          'permission_denied',
          `user "${user}" may not ${verb === 'approved' ? 'approve' : 'reject'} step ${id} (${step.name}, workflow ${step.workflow_id}): its approvers are ${gate.approvers!.join(', ') || 'nobody'}`,
          { details: { user, approvers: gate.approvers } },
        );
      }
      if (gate.approvers !== undefined && this.#deps.actAs) await refuseUnlessRoleActsAs(this.#deps.pool, this.#deps.actAs.clients, user, { doing: 'approve', consequence: 'nothing was readied' });
      // The gate's approval.schema: refused here with paths, as the executor would refuse it.
      const issues = approvalDataIssuesInFlow(wf?.flow, step.name, result);
      if (issues.length > 0) {
        throw new OperationError(
          'invalid_input',
          `the data does not match the approval.schema of step ${id} (${step.name}, workflow ${step.workflow_id}) (${issues.length} issue(s)); nothing was readied:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}${gate.schema !== undefined ? `\n  approval.schema: ${JSON.stringify(gate.schema)}` : ''}`,
          { details: { issues, ...(gate.schema !== undefined ? { schema: gate.schema } : {}) } },
        );
      }
      const readied = await readyPendingStep(this.#deps.pool, { id, readiedBy: user, ...(result !== undefined ? { result } : {}) });
      if (!readied) {
        // Someone else readied it (or the gate expired) between our read and our update.
        await this.#refuseUnlessPending(id, verb);
        throw new OperationError('refused', `step ${id} could not be readied`);
      }
      return {
        stepId: String(readied.id),
        workflowId: String(readied.workflow_id),
        name: readied.name,
        status: readied.status,
        result: readied.result,
        readiedBy: readied.readied_by,
        readiedAt: readied.readied_at ? new Date(readied.readied_at).toISOString() : null,
      };
    });
  }

  async #refuseUnlessPending(id: string, verb: 'approved' | 'rejected') {
    const step = await getStepWithWorkflow(this.#deps.db, id);
    if (!step) throw new OperationError('not_found', stepNotFoundMessage(id, this.#deps.schema));
    if (step.status !== 'pending') throw new OperationError('refused', stepNotPendingMessage(step, verb));
    refuseSignalWait(step, verb);
    refuseWorkerStep(step, verb);
    if (step.child_id !== null) {
      // The database refuses it too (sql/0011): it completes when its sub-workflow finishes.
      throw new OperationError(
        'refused',
        `step ${id} (${step.name}) is not a gate: it waits for sub-workflow ${step.child_id} and completes when that workflow finishes; approve the gates inside it (stepd status ${step.child_id})`,
        { details: { childId: String(step.child_id) } },
      );
    }
    return step;
  }

  async #refuseUnlessRedrivable(id: string, user: string): Promise<WorkflowRow> {
    const wf = await getWorkflow(this.#deps.db, id);
    if (!wf) throw new OperationError('not_found', workflowNotFoundMessage(id, this.#deps.schema));
    this.#refuseUnlessOwn(wf, user, 'retry');
    if (wf.status !== 'failed') throw new OperationError('refused', workflowNotFailedMessage(wf));
    const check = checkRedrive(wf, await getWorkflowSteps(this.#deps.db, id), (flow) => compileFlow(flow, this.#caps()));
    if (!check.ok) throw new OperationError('refused', cannotRedriveMessage(wf, check.message, check.issues), { details: check.issues ? { issues: check.issues } : undefined });
    return wf;
  }

  async #refuseUnlessActive(id: string, user: string): Promise<void> {
    const wf = await getWorkflow(this.#deps.db, id);
    if (!wf) throw new OperationError('not_found', workflowNotFoundMessage(id, this.#deps.schema));
    this.#refuseUnlessOwn(wf, user, 'cancel');
    if (wf.status !== 'new' && wf.status !== 'running') throw new OperationError('refused', workflowNotActiveMessage(wf));
  }

  /** Cancel and retry: the workflow's own user (created_by) or an admin (config api.admins) only. */
  #refuseUnlessOwn(wf: WorkflowRow, user: string, verb: 'cancel' | 'retry'): void {
    if (wf.created_by === user || (this.#deps.admins ?? []).includes(user)) return;
    throw new OperationError('permission_denied', notYourWorkflowMessage(wf, user, verb), { details: { user, createdBy: wf.created_by } });
  }

  /** Runs database work, turning what the database says into OperationErrors. */
  async #db<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toOperationError(err);
    }
  }
}

/** A rejection's result: {approved: false, reason?}, keeping what `data` adds. Same as `stepd approve --reject`. */
export function rejection(data: unknown, reason: string | undefined): Record<string, unknown> {
  const extra = typeof data === 'object' && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : data === undefined ? {} : { data };
  return { ...extra, approved: false, ...(reason !== undefined ? { reason } : {}) };
}
