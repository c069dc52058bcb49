/**
 * Redrive: a client set a failed workflow back to 'running' (`UPDATE workflows SET status =
 * 'running' WHERE id = $1 AND status = 'failed'`, which the guard stamps with
 * `redrive_requested_at`). The executor takes each request in one transaction under the
 * workflow row lock, and either
 *   - resumes it: the plan (redrivePlan.ts) gives the failed and cancelled steps new attempts,
 *     reopens failed fan-outs, runs a failed transition again; done steps keep their results;
 *     error and completed_at are cleared, `redrives` counts one more, the deadline starts afresh;
 *   - or refuses it: the workflow is failed again with code `redrive_refused`, the reason in
 *     `details.reason` and the original error in `details.error`.
 * The stamp is cleared by the same transaction, so a request survives an executor crash; the
 * executor looks for stamped rows on a wake-up and at every poll tick.
 *
 * A request's transaction waits for a lock held elsewhere (a signal bucket a client keeps open,
 * sql/0025) only as long as what is left of REDRIVE_LOCK_WAIT_MS for the whole pass (the claim
 * loop waits for it); past that the request stays stamped and is skipped for a backoff
 * (LockDeferrals), then tried again: only the held workflow waits.
 */
import type pg from 'pg';
import { withTransaction } from '../../db/connect.js';
import {
  clearRedriveRequest,
  findRedriveRequests,
  getPrecedingRowInChain,
  getStepsForRedrive,
  lockWorkflowIfRedriveRequested,
  refuseRedrive,
  reopenFailedForkRows,
  resumeRedrivenWorkflow,
  type RedriveRequest,
} from '../../db/queries.js';
import { isLockNotAvailable, isRetryablePgError, type ErrorData } from '../../errors.js';
import { storableIssues, storableText } from '../../flow/caps.js';
import { getStep } from '../../flow/compiled.js';
import { resolveSuccess } from '../../flow/transitions.js';
import { decideActingUser } from '../../security/actAs.js';
import { Advance, type Origin } from './advance.js';
import { checkRedrive, originalError } from './redriveCheck.js';
import type { RedriveAction } from './redrivePlan.js';
import { LockDeferrals } from '../core/lockDeferrals.js';
import type { TxDeps, TxResult } from '../core/txTypes.js';
import { TxWriter, type ClaimOnCreate } from '../core/txWriter.js';
import { signalWaitAgain, startSignalWait } from './signalWaits.js';
import type { WorkflowInfo } from '../core/workflowCache.js';

export interface RedriveResult extends TxResult {
  /** Requests handled (resumed or refused). */
  handled: number;
}

const empty = (): RedriveResult => ({ cancelledRunning: [], recorded: new Set(), createdWork: false, claimed: [], handled: 0 });

/**
 * Handles up to `limit` redrive requests, each in a transaction of its own. A request whose
 * handling fails for a reason other than the database connection is refused with code
 * `redrive_failed`, so one bad row never blocks the others or comes back forever.
 */
export async function redriveRequested(deps: TxDeps, limit: number, claim?: ClaimOnCreate, held: LockDeferrals = new LockDeferrals()): Promise<RedriveResult> {
  const out = empty();
  // What the pass may still wait for locks held elsewhere, in all (the claim loop waits for it).
  let lockWaitMs = REDRIVE_LOCK_WAIT_MS;
  for (const id of await findRedriveRequests(deps.pool, limit, held.skipped())) {
    let r: RedriveResult;
    try {
      r = await redriveOne(deps, id, claim, Math.max(1, lockWaitMs));
    } catch (err) {
      if (isRetryablePgError(err)) throw err;
      if (isLockNotAvailable(err)) {
        lockWaitMs = 0;
        deps.log.warn({ workflowId: id, retryInMs: held.defer(id) }, 'redriving a workflow met a row lock held elsewhere; it is tried again later');
        continue;
      }
      deps.log.error({ err, workflowId: id }, 'redriving a workflow failed; refusing the redrive');
      const error: ErrorData = { code: 'redrive_failed', message: storableText(`redriving this workflow failed: ${(err as Error).message}`) };
      r = await withTransaction(deps.pool, async (client) => {
        const req = await lockWorkflowIfRedriveRequested(client, id);
        if (!req) return empty();
        await refuseRedrive(client, id, withOriginal(error, 'redrive_failed', req.error));
        return { ...empty(), handled: 1 };
      });
    }
    out.handled += r.handled;
    out.cancelledRunning.push(...r.cancelledRunning);
    out.claimed.push(...r.claimed);
    out.createdWork ||= r.createdWork;
    if (r.readyInMs !== undefined) out.readyInMs = Math.min(out.readyInMs ?? Infinity, r.readyInMs);
  }
  return out;
}

/** The error a refused redrive leaves: the reason, and the workflow's original error inside. */
function withOriginal(error: ErrorData, reason: string, previous: ErrorData | null): ErrorData {
  return { ...error, details: { reason, ...(error.details as object | undefined), error: originalError(previous) } };
}

/** How long one pass of redrive requests waits for row locks held elsewhere, in all. */
export const REDRIVE_LOCK_WAIT_MS = 200;

async function redriveOne(deps: TxDeps, id: string, claim: ClaimOnCreate | undefined, lockTimeoutMs: number): Promise<RedriveResult> {
  let writer: TxWriter | undefined;
  try {
    return await withTransaction(deps.pool, async (client) => {
      const w = (writer = new TxWriter(client, deps.schema, claim));
      const req = await lockWorkflowIfRedriveRequested(client, id);
      if (!req) return empty();
      if (req.status !== 'running' && req.status !== 'failed') {
        // Cancelled (or otherwise ended) after the request: nothing to redrive.
        await clearRedriveRequest(client, id);
        deps.log.info({ workflowId: id, status: req.status }, 'redrive request dropped: the workflow is no longer failed');
        return { ...empty(), handled: 1 };
      }
      return resume(deps, client, w, req);
    }, { lockTimeoutMs });
  } catch (err) {
    writer?.releaseClaims();
    throw err;
  }
}

async function resume(deps: TxDeps, client: pg.PoolClient, w: TxWriter, req: RedriveRequest): Promise<RedriveResult> {
  const original = originalError(req.error);
  const refuse = async (reason: string, message: string, details: object = {}): Promise<RedriveResult> => {
    const error = withOriginal({ code: 'redrive_refused', message: storableText(`redrive refused: ${message}`), details }, reason, original);
    await refuseRedrive(client, req.id, error);
    w.event({ type: 'workflow.failed', schema: deps.schema, workflowId: req.id, error: { code: error.code, message: error.message }, at: new Date().toISOString() });
    await w.finish(deps.emitEvents);
    deps.log.warn({ workflowId: req.id, reason, message }, 'redrive refused');
    return { ...empty(), handled: 1 };
  };
  // The role that answers for the workflow must still be allowed its user (clients.actAs may have narrowed since admission).
  const acting = decideActingUser({ role: req.created_role, trusted: req.role_trusted, createdBy: req.created_by }, deps.clients);
  if (!acting.ok) return refuse('permission_denied', acting.message, acting.details);
  const plan = checkRedrive(req, req.flow === null ? [] : await getStepsForRedrive(client, req.id), (f) => deps.cache.compiler.compile(f));
  if (!plan.ok) return refuse(plan.reason, plan.message, plan.issues ? { issues: storableIssues(plan.issues) } : {});
  const flow = plan.flow;

  const redrives = await resumeRedrivenWorkflow(client, req.id, flow.timeoutMs);
  await reopenFailedForkRows(client, plan.reopen);
  const wf: WorkflowInfo = { id: req.id, name: req.name, input: req.input ?? {}, createdBy: req.created_by, role: req.created_role, flow };
  deps.cache.put(wf);
  w.setStepCount(req.id, req.step_count);
  const advance = new Advance(client, deps, wf, w);
  advance.event('workflow.started', { redrive: redrives });
  for (const action of plan.actions) await applyAction(deps, client, advance, w, wf, action);
  await w.finish(deps.emitEvents);
  if (advance.ended) deps.cache.forget(req.id);
  deps.log.info({ workflowId: req.id, workflow: req.name, redrives, steps: plan.actions.length, reopened: plan.reopen.length }, 'workflow redriven');
  return {
    cancelledRunning: w.cancelledRunning,
    recorded: new Set(),
    createdWork: w.readyNow,
    claimed: w.claimed,
    handled: 1,
    ...(w.soonestDelayMs !== undefined ? { readyInMs: w.soonestDelayMs } : {}),
  };
}

async function applyAction(deps: TxDeps, client: pg.PoolClient, advance: Advance, w: TxWriter, wf: WorkflowInfo, action: RedriveAction): Promise<void> {
  if (advance.ended) return;
  switch (action.kind) {
    case 'create': {
      const error = await routedError(client, wf, action.name, action.pos, action.rowId);
      return advance.createStep(action.name, action.pos, error ? { error } : {});
    }
    case 'transition': {
      const row = action.row;
      const step = getStep(wf.flow, row.name);
      const origin = originOf(row);
      const error = await routedError(client, wf, row.name, origin, row.id);
      const scope = await advance.scopes.forStep(step, origin, { result: row.result, ...(error ? { error } : {}) });
      return advance.apply(resolveSuccess(wf.flow, row.name, scope), origin);
    }
    case 'attempt': {
      const row = action.row;
      const step = getStep(wf.flow, row.name);
      const base = {
        workflowId: wf.id,
        name: row.name,
        tool: step.tool,
        attempt: row.attempt + 1,
        firstAttemptId: row.first_attempt_id ?? row.id,
        fanoutId: row.fanout_id,
        itemIndex: row.item_index,
        ...(wf.priority ? { priority: wf.priority } : {}),
      };
      const leaseMs = step.timeoutMs + deps.leaseGraceMs;
      if (step.kind === 'gate') {
        // It waits again with what it showed the first time (its rendered message and approvers)
        // and a fresh timeout; inserted now, so step.waiting carries the new gate's id.
        const timeout = step.approval?.timeoutMs;
        const id = await w.insertNow({ ...base, args: row.args ?? null, status: 'pending', ...(timeout !== undefined ? { expiresInMs: timeout } : {}) });
        const message = (row.args as { message?: unknown } | null)?.message;
        advance.event('step.waiting', {
          stepId: id,
          step: row.name,
          attempt: base.attempt,
          ...(row.item_index !== null ? { itemIndex: row.item_index } : {}),
          ...(typeof message === 'string' ? { message } : {}),
        });
        return;
      }
      if (step.kind === 'signal') {
        // It waits again for what its row recorded (a signal it consumed stays consumed).
        const again = await startSignalWait({ db: client, writer: w, schema: deps.schema }, step, base, signalWaitAgain(step, row.args));
        if (again.waiting) advance.event('step.waiting', { stepId: again.id, step: row.name, attempt: base.attempt, ...(row.item_index !== null ? { itemIndex: row.item_index } : {}), signal: again.wait });
        return;
      }
      if (step.kind === 'timer') {
        // A timer keeps the instant it was waiting for; one already due is ready now.
        const at = row.ready_at ? new Date(row.ready_at) : undefined;
        const when = at && at.getTime() > Date.now() ? { readyAt: at } : { readyInMs: 0 };
        w.queue({ ...base, args: null, status: 'ready', ...when }, { user: wf.createdBy, leaseMs });
        return;
      }
      if (step.kind === 'fork') return advance.createStep(row.name, originOf(row), {});
      w.queue({ ...base, args: row.args, status: 'ready', readyInMs: 0 }, { user: wf.createdBy, leaseMs });
      return;
    }
  }
}

function originOf(row: { id: string; name: string; attempt: number; args: unknown; fanout_id: string | null; item_index: number | null; first_attempt_id: string | null }): Origin {
  return { id: row.id, name: row.name, attempt: row.attempt, args: row.args, fanoutId: row.fanout_id, itemIndex: row.item_index, firstAttemptId: row.first_attempt_id };
}

/**
 * For a step some `onError` names: the error that routed there (the failed row just before
 * `rowId` in its chain), so `{{error}}` resolves again as it did the first time.
 */
async function routedError(
  client: pg.PoolClient,
  wf: WorkflowInfo,
  name: string,
  pos: { fanoutId: string | null; itemIndex: number | null },
  rowId: string,
): Promise<ErrorData | undefined> {
  if (![...wf.flow.steps.values()].some((s) => s.onError === name)) return undefined;
  const prev = await getPrecedingRowInChain(client, { workflowId: wf.id, fanoutId: pos.fanoutId, itemIndex: pos.itemIndex, beforeId: rowId });
  if (!prev || prev.status !== 'failed' || !prev.error || wf.flow.steps.get(prev.name)?.onError !== name) return undefined;
  return { step: prev.name, attempt: prev.attempt, ...prev.error };
}
