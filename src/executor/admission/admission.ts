/**
 * Admission: `new` workflows become `running` in one transaction per batch. Each flow is
 * validated (an invalid one fails at once, with all its issues), the acting user checked against
 * the config's `clients`, and the first step created — already claimed by this executor where
 * its slots allow (TxWriter's claim on create), so it starts without waiting for a claim.
 */
import { forkStartProblem } from '../../flow/forkStart.js';
import type pg from 'pg';
import { withTransaction } from '../../db/connect.js';
import {
  admitNewWorkflowsResolvingRegisteredFlows,
  failWorkflowIfActive,
  notifyStepsReady,
  peekNewWorkflowIds,
  setWorkflowDeadline,
  setWorkflowUserIfRunning,
  type AdmittedWorkflow,
} from '../../db/queries.js';
import { isLockNotAvailable, isRetryablePgError, StepError, type ErrorData } from '../../errors.js';
import { renderKey, roleScopedKey } from '../../flow/capacity.js';
import { setWorkflowConcurrencyKey } from '../../db/queries/capacity.js';
import { admissionProblem, storableIssues, storableText } from '../../flow/caps.js';
import { inputSchemaProblem } from '../../flow/jsonSchema.js';
import { decideActingUser } from '../../security/actAs.js';
import { Advance } from '../transitions/advance.js';
import type { TxDeps } from '../core/txTypes.js';
import type { ClaimOnCreate, CreatedClaim, TxWriter } from '../core/txWriter.js';
import type { WorkflowInfo } from '../core/workflowCache.js';
import { inWriterTransaction } from '../core/writerTransaction.js';
import { LockDeferrals } from '../core/lockDeferrals.js';
import { RowHeldElsewhere } from '../core/rowHeldElsewhere.js';
import { ADMISSION_LOCK_WAIT_MS, workflowHeldAtAdmission } from './admissionLocks.js';

/** Batches redone in one admitWorkflows call, each without a workflow that met a held lock. */
const MAX_REDOS_AROUND_HELD = 3;

/**
 * Fair admission's round-robin cursor (one per executor): a batch smaller than the roles with new
 * workflows serves the roles after `afterRole` first, and moves it on.
 */
export interface AdmissionTurns {
  afterRole: string;
}

export interface Admission {
  admitted: number;
  /** First steps created already claimed by this executor. */
  claimed: CreatedClaim[];
  /** Whether first steps were created ready for the claim loop. */
  readyNow: boolean;
  readyInMs?: number;
  /** Milliseconds until a workflow deferred for a held lock (admissionLocks.ts) may be tried again. */
  deferredInMs?: number;
}

/**
 * Admits up to `limit` new workflows in one transaction: validates each flow and creates its
 * first step. If the batch fails (a row the database refuses), each workflow is admitted in a
 * transaction of its own and the one that fails is failed with `admission_failed`, so a bad row
 * never stalls the others. A row the database will not even let fail (one written past the guard
 * that breaks a constraint) goes into `unadmittable`: admissions leave it alone from then on, and
 * the error log names it for an operator to repair or delete.
 */
export async function admitWorkflows(
  deps: TxDeps,
  limit: number,
  claim?: ClaimOnCreate,
  unadmittable: Set<string> = new Set(),
  turns: AdmissionTurns = { afterRole: '' },
  deferrals: LockDeferrals = new LockDeferrals(),
): Promise<Admission> {
  // A workflow that met a lock held elsewhere is deferred, and the batch redone without it.
  // The first try waits ADMISSION_LOCK_WAIT_MS for a lock; the redos hardly wait (every new workflow waits for them).
  for (let redo = 0; redo <= MAX_REDOS_AROUND_HELD; redo++) {
    try {
      const lockWaitMs = redo === 0 ? ADMISSION_LOCK_WAIT_MS : 1;
      return withDeferred(await admitOrOneByOne(deps, limit, claim, { unadmittable, turns, deferrals, lockWaitMs }), deferrals);
    } catch (err) {
      const held = workflowHeldAtAdmission(err);
      if (held === undefined) throw err;
      deps.log.warn({ workflowId: held, retryInMs: deferrals.defer(held) }, 'admitting a workflow met a row lock held elsewhere; it is tried again shortly');
    }
  }
  return withDeferred({ admitted: 0, claimed: [], readyNow: false }, deferrals);
}

function withDeferred(a: Admission, deferrals: LockDeferrals): Admission {
  const ms = deferrals.nextInMs();
  return ms === undefined ? a : { ...a, deferredInMs: ms };
}

async function admitOrOneByOne(
  deps: TxDeps,
  limit: number,
  claim: ClaimOnCreate | undefined,
  o: { unadmittable: Set<string>; turns: AdmissionTurns; deferrals: LockDeferrals; lockWaitMs: number },
): Promise<Admission> {
  const { unadmittable, turns, deferrals, lockWaitMs } = o;
  const skip = [...unadmittable, ...deferrals.skipped()];
  try {
    return await admitBatch(deps, limit, claim, { skip, turns, lockWaitMs });
  } catch (err) {
    // A lock held elsewhere is never the workflow's fault: deferred (RowHeldElsewhere) or retried by the lane.
    if (isRetryablePgError(err) || err instanceof RowHeldElsewhere || isLockNotAvailable(err)) throw err;
    deps.log.warn({ err }, 'admitting a batch of workflows failed; admitting them one by one');
    const out: Admission = { admitted: 0, claimed: [], readyNow: false };
    for (const id of await peekNewWorkflowIds(deps.pool, limit, skip)) {
      try {
        const r = await admitBatch(deps, 1, claim, { only: id, lockWaitMs });
        out.admitted += r.admitted;
        out.claimed.push(...r.claimed);
        out.readyNow ||= r.readyNow;
      } catch (oneErr) {
        const held = workflowHeldAtAdmission(oneErr);
        if (held !== undefined) deferrals.defer(held);
        else if (isLockNotAvailable(oneErr) || isRetryablePgError(oneErr)) throw oneErr;
        else await failUnadmitted(deps, id, oneErr, unadmittable);
      }
    }
    return out;
  }
}

/** Fails a workflow whose admission failed; if even that is refused, it is left out of admissions from now on. */
async function failUnadmitted(deps: TxDeps, id: string, cause: unknown, unadmittable: Set<string>): Promise<void> {
  deps.cache.forget(id);
  const byDatabase = typeof cause === 'object' && cause !== null && 'severity' in cause;
  const error = { code: 'admission_failed', message: storableText(`${byDatabase ? 'the database refused to start this workflow' : 'starting this workflow failed'}: ${(cause as Error).message}`) };
  try {
    await withTransaction(deps.pool, (client) => failWorkflowIfActive(client, id, error));
    deps.log.error({ err: cause, workflowId: id }, 'workflow could not be admitted');
  } catch (failErr) {
    if (isRetryablePgError(failErr)) throw failErr;
    unadmittable.add(id);
    deps.log.error(
      { err: cause, failErr, workflowId: id },
      'workflow can neither be admitted nor failed: the database refuses to change its row; admissions leave it alone until it is repaired or deleted',
    );
  }
}

async function admitBatch(
  deps: TxDeps,
  limit: number,
  claim: ClaimOnCreate | undefined,
  which: { skip?: readonly string[]; only?: string; turns?: AdmissionTurns; lockWaitMs: number },
): Promise<Admission> {
  // The workflow being admitted when a lock wait ran out (RowHeldElsewhere); none outside admitOne.
  const at: { workflowId?: string } = {};
  return inWriterTransaction(deps, claim, async (client, w) => {
    const { turns, lockWaitMs: _lockWaitMs, ...pick } = which;
    const rows = await admitNewWorkflowsResolvingRegisteredFlows(client, limit, { ...pick, ...(turns ? { afterRole: turns.afterRole } : {}) });
    if (turns) turns.afterRole = nextAfterRole(turns.afterRole, rows);
    // Higher priority first: their first steps take this executor's free slots first (stable: oldest first within a level).
    rows.sort((a, b) => (b.priority ?? 0) - (a.priority ?? 0));
    for (const row of rows) {
      // Admitted (not refused by the statement): its first step row is counted already.
      if (row.status !== 'failed') w.precountFirstStep(row.id, row.step_count);
      at.workflowId = row.id;
      await admitOne(deps, client, row, w);
      at.workflowId = undefined;
    }
    await w.finish(deps.emitEvents);
    // First steps left ready (more than this executor's slots): tell every executor, so a burst
    // admitted here in one batch is claimed by whichever has free slots (the ready trigger is
    // quiet for the executor's own writes).
    if (w.readyNow) await notifyStepsReady(client, deps.schema);
    return {
      admitted: rows.length,
      claimed: w.claimed,
      readyNow: w.readyNow,
      ...(w.soonestDelayMs !== undefined ? { readyInMs: w.soonestDelayMs } : {}),
    };
  }, { lockTimeoutMs: which.lockWaitMs }).catch((err: unknown) => {
    if (at.workflowId !== undefined && isLockNotAvailable(err)) throw new RowHeldElsewhere({ stage: 'admit', workflowId: at.workflowId }, which.lockWaitMs, err);
    throw err;
  });
}

/**
 * The last role a batch served in turn (roles after the cursor come first, then it wraps): the
 * greatest it served at or before the cursor if it wrapped, else the greatest after it.
 */
function nextAfterRole(after: string, rows: AdmittedWorkflow[]): string {
  const roles = rows.map((r) => r.created_role ?? '');
  const wrapped = roles.filter((r) => r <= after);
  const pool = wrapped.length > 0 ? wrapped : roles;
  return pool.reduce((a, b) => (b > a ? b : a), '');
}

/** Admits one locked `new` workflow: invalid flows fail at once; valid ones get their first step. */
async function admitOne(deps: TxDeps, client: pg.PoolClient, admitted: AdmittedWorkflow, w: TxWriter): Promise<void> {
  if (admitted.status === 'failed') {
    // The admission statement refused it already (a by-name start of an unknown flow or version).
    const error = admitted.error ?? { code: 'unknown_flow', message: 'unknown flow' };
    deps.log.warn({ workflowId: admitted.id, workflow: storableText(admitted.name, 200), error }, 'workflow rejected at admission');
    w.event({ type: 'workflow.failed', schema: deps.schema, workflowId: admitted.id, error: { code: error.code, message: error.message }, at: new Date().toISOString() });
    return;
  }
  const row = await checkActingUser(deps, client, admitted, w);
  if (!row) return;
  const compiled = deps.cache.compiler.compileJsonText(row.flow_text ?? 'null');
  // Issues and messages may quote the client's text: storable* keeps them within what jsonb accepts.
  const refusal: ErrorData | undefined = compiled.ok
    ? (admissionProblem(row.name, row.input, deps.cache.compiler.caps) ?? storableProblem(inputSchemaProblem(compiled.flow.inputSchema, row.input)))
    : { code: 'invalid_flow', message: `flow is invalid: ${compiled.issues.length} issue(s)`, issues: storableIssues(compiled.issues) };
  if (refusal || !compiled.ok) {
    const error = refusal ?? { code: 'invalid_flow', message: 'flow is invalid' };
    await failWorkflowIfActive(client, row.id, error);
    deps.log.warn({ workflowId: row.id, workflow: storableText(row.name, 200), error }, 'workflow rejected at admission');
    w.event({ type: 'workflow.failed', schema: deps.schema, workflowId: row.id, error: { code: error.code, message: error.message }, at: new Date().toISOString() });
    return;
  }
  const wf: WorkflowInfo = { id: row.id, name: row.name, input: row.input ?? {}, createdBy: row.created_by, role: row.created_role, flow: compiled.flow, ...(row.priority ? { priority: row.priority } : {}) };
  if (!(await setFlowKey(client, wf, w, deps))) return;
  deps.cache.put(wf);
  if (compiled.flow.timeoutMs !== undefined) await setWorkflowDeadline(client, row.id, compiled.flow.timeoutMs);
  const advance = new Advance(client, deps, wf, w);
  advance.event('workflow.started');
  // A fork (sql/0031) runs from its chosen step, the results before it copied by fork_workflow.
  const first = row.fork_step ?? compiled.flow.start;
  const forkProblem = row.fork_step ? forkStartProblem(compiled.flow, row.fork_step) : undefined;
  if (forkProblem) {
    const error: ErrorData = { code: 'invalid_fork', message: storableText(`this fork cannot run: ${forkProblem}`) };
    await failWorkflowIfActive(client, row.id, error);
    w.event({ type: 'workflow.failed', schema: deps.schema, workflowId: row.id, error: { code: error.code, message: error.message }, at: new Date().toISOString() });
    return;
  }
  await advance.createStep(first, { fanoutId: null, itemIndex: null }, {});
  if (advance.ended) deps.cache.forget(wf.id);
  deps.log.info({ workflowId: row.id, workflow: row.name, user: row.created_by }, 'workflow started');
}

/**
 * The role that wrote the workflow may start it as its `created_by` (config `clients`); else the
 * workflow fails with `permission_denied` before any step exists. Returns the row with the user
 * it runs as (a client role's own name when it gave none), or undefined when refused.
 */
async function checkActingUser(deps: TxDeps, client: pg.PoolClient, row: AdmittedWorkflow, w: TxWriter): Promise<AdmittedWorkflow | undefined> {
  const acting = decideActingUser({ role: row.created_role, trusted: row.role_trusted, createdBy: row.created_by }, deps.clients);
  if (!acting.ok) {
    const error = { code: 'permission_denied', message: acting.message, details: acting.details };
    await failWorkflowIfActive(client, row.id, error);
    deps.log.warn({ workflowId: row.id, workflow: row.name, role: acting.details.role, user: acting.details.user }, 'workflow refused: its role may not act as its user');
    w.event({ type: 'workflow.failed', schema: deps.schema, workflowId: row.id, error: { code: error.code, message: error.message }, at: new Date().toISOString() });
    return undefined;
  }
  if (acting.user === row.created_by || acting.user === null) return row;
  await setWorkflowUserIfRunning(client, row.id, acting.user);
  return { ...row, created_by: acting.user };
}

/**
 * A flow with `concurrency`: its key value, rendered from the input, is written on the row; its
 * gated steps take the key when the first of them starts (capacity_verdicts, sql/0028). A key
 * that cannot be rendered fails the workflow (`invalid_key`). Returns whether it may go on.
 */
async function setFlowKey(client: pg.PoolClient, wf: WorkflowInfo, w: TxWriter, deps: TxDeps): Promise<boolean> {
  const c = wf.flow.concurrency;
  if (!c) return true;
  let key: string;
  try {
    key = roleScopedKey(wf.role, renderKey(c.key, { input: wf.input }));
  } catch (err) {
    if (!(err instanceof StepError)) throw err;
    const error = { code: 'invalid_key', message: `the flow's concurrency key cannot be rendered: ${storableText(err.message)}` };
    await failWorkflowIfActive(client, wf.id, error);
    w.event({ type: 'workflow.failed', schema: deps.schema, workflowId: wf.id, error, at: new Date().toISOString() });
    return false;
  }
  await setWorkflowConcurrencyKey(client, wf.id, key, c.limit);
  return true;
}

/** An error whose issues may quote the client's text, made storable as jsonb. */
function storableProblem(error: (ErrorData & { issues: { path: string; message: string }[] }) | undefined): ErrorData | undefined {
  return error && { ...error, message: storableText(error.message), issues: storableIssues(error.issues) };
}

