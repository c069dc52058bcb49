/**
 * The executor's transactions. Each locks the workflow rows it touches first (in id order, so
 * concurrent batches never deadlock), which serializes the transitions of one workflow even
 * across executors; then Advance decides and writes through one shared TxWriter.
 *
 * Outcomes are recorded in batches: many finished steps, one transaction, one commit.
 */
import type pg from 'pg';
import { withTransaction } from '../db/connect.js';
import {
  admitNewWorkflowsResolvingRegisteredFlows,
  endWorkflowCancellingLiveSteps,
  failWorkflowIfActive,
  finishGateIfExpired,
  finishStepIfLeaseExpired,
  lockWorkflows,
  lockWorkflowsAndFinishSteps,
  notifyEvents,
  setWorkflowDeadline,
  setWorkflowUserIfRunning,
  type AdmittedWorkflow,
  type FinishValues,
  type FinishedStep,
} from '../db/queries.js';
import type { ClientsConfig } from '../configFile.js';
import { isRetryablePgError, type ErrorData } from '../errors.js';
import { admissionProblem, storableIssues, storableText } from '../flow/caps.js';
import { inputSchemaProblem } from '../flow/jsonSchema.js';
import { decideActingUser } from '../security/actAs.js';
import { EVENTS_CHANNEL } from '../events.js';
import { Advance, type AdvanceDeps, type Outcome } from './advance.js';
import { HEAVY_OUTCOME_STATEMENTS, HeavyOutcome, OutcomeBudget } from './outcomeBudget.js';

export { HEAVY_OUTCOME_STATEMENTS } from './outcomeBudget.js';
import { TxWriter, type ClaimOnCreate, type CreatedClaim } from './txWriter.js';
import type { WorkflowCache, WorkflowInfo } from './workflowCache.js';

export interface TxDeps extends AdvanceDeps {
  pool: pg.Pool;
  cache: WorkflowCache;
  executorId: string;
  /** Which users each database role may start workflows as (config `clients`). */
  clients?: ClientsConfig | undefined;
  /** Told, after commit, of the workflows a transaction ended (completed or failed): their trace spans. */
  onWorkflowsEnded?: ((workflowIds: string[]) => void) | undefined;
}

export interface TxResult {
  /** Running steps this transaction cancelled; abort their tools. */
  cancelledRunning: string[];
  /** Steps whose outcome was recorded (the others were no longer ours: late results). */
  recorded: Set<string>;
  /** Whether this transaction created steps ready now for the claim loop (wake it). */
  createdWork: boolean;
  /** The soonest a step it created with a delay (retry backoff, timer) becomes ready. */
  readyInMs?: number;
  /** Steps created already claimed by this executor: start them now. */
  claimed: CreatedClaim[];
  /**
   * Outcomes this batch did not record, to be recorded each in a transaction of its own (they
   * come back with `alone: true`): their workflow was locked by another transaction, or settling
   * it took more than HEAVY_OUTCOME_STATEMENTS statements. So one heavy or blocked workflow never
   * holds the commit of the others.
   */
  deferred?: FinishInput[];
}

const empty = (): TxResult => ({ cancelledRunning: [], recorded: new Set(), createdWork: false, claimed: [] });

export type FinishGuard = 'running' | 'lease-expired' | 'gate-expired';

export interface FinishInput {
  stepId: string;
  workflowId: string;
  guard: FinishGuard;
  outcome: Outcome;
  args?: unknown;
  /**
   * Record this outcome in a transaction of its own workflow: wait for the workflow's row lock
   * and settle whatever it takes. Without it, a batch skips workflows locked elsewhere and
   * outcomes whose settling is heavy, and hands them back in TxResult.deferred.
   */
  alone?: boolean;
}

/** PostgreSQL refused a JSON value: `\u0000` in a string (22P05) or a lone surrogate (22P02). */
function isUnstorableJson(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22P05' || code === '22P02';
}

/**
 * Records the outcomes (each fenced by its guard) and advances their workflows, in one
 * transaction. If the batch fails for a reason other than a lost connection, each outcome is
 * recorded on its own, so one bad outcome never holds the others back; an outcome PostgreSQL
 * cannot store (a NUL character in a result) fails its attempt with `invalid_result`.
 */
export async function finishSteps(deps: TxDeps, given: FinishInput[], claim?: ClaimOnCreate): Promise<TxResult> {
  // One outcome per step: a second one in the same batch would advance its workflow twice.
  const inputs = onePerStep(given, deps);
  if (inputs.length === 0) return empty();
  try {
    return await finishBatch(deps, inputs, claim);
  } catch (err) {
    if (err instanceof HeavyOutcome) {
      // Redo the batch without that workflow; its outcomes get a transaction of their own.
      const heavy = inputs.filter((i) => i.workflowId === err.workflowId).map((i) => ({ ...i, alone: true }));
      deps.log.info({ workflowId: err.workflowId, stepIds: heavy.map((i) => i.stepId) }, 'settling this workflow is heavy: recording its outcomes in a transaction of their own');
      const r = await finishSteps(deps, inputs.filter((i) => i.workflowId !== err.workflowId), claim);
      return { ...r, deferred: [...(r.deferred ?? []), ...heavy] };
    }
    if (isRetryablePgError(err)) throw err;
    if (inputs.length > 1) {
      deps.log.warn({ err, count: inputs.length }, 'recording a batch of outcomes failed; recording them one by one');
      const merged = empty();
      for (const input of inputs) {
        const r = await finishSteps(deps, [input], claim);
        merged.cancelledRunning.push(...r.cancelledRunning);
        for (const id of r.recorded) merged.recorded.add(id);
        merged.createdWork ||= r.createdWork;
        merged.claimed.push(...r.claimed);
        if (r.deferred) (merged.deferred ??= []).push(...r.deferred);
        if (r.readyInMs !== undefined) merged.readyInMs = Math.min(merged.readyInMs ?? Infinity, r.readyInMs);
      }
      return merged;
    }
    const input = inputs[0]!;
    if (!isUnstorableJson(err)) throw err;
    deps.log.warn({ err, workflowId: input.workflowId, stepId: input.stepId }, 'step outcome cannot be stored; failing the step');
    const error = { code: 'invalid_result', message: `the step's outcome cannot be stored as PostgreSQL JSON: ${(err as Error).message}`, retryable: false };
    return finishBatch(deps, [{ stepId: input.stepId, workflowId: input.workflowId, guard: input.guard, outcome: { status: 'failed', error } }], claim);
  }
}

function onePerStep(inputs: FinishInput[], deps: TxDeps): FinishInput[] {
  const seen = new Set<string>();
  const out = inputs.filter((i) => !seen.has(i.stepId) && seen.add(i.stepId));
  if (out.length < inputs.length) deps.log.warn({ dropped: inputs.length - out.length }, 'dropped a second outcome of the same step in one batch');
  return out;
}

/** Records one outcome, alone (nothing is deferred): the watchdog's and recovery's entry point. */
export function finishStep(deps: TxDeps, input: FinishInput): Promise<TxResult> {
  return finishSteps(deps, [{ ...input, alone: true }]);
}

function finishValues(input: FinishInput): FinishValues {
  const values: FinishValues =
    input.outcome.status === 'done'
      ? { id: input.stepId, status: 'done', result: input.outcome.result }
      : { id: input.stepId, status: 'failed', error: stripInternal(input.outcome.error) };
  if (input.args !== undefined) values.args = input.args;
  return values;
}

async function finishBatch(deps: TxDeps, inputs: FinishInput[], claim?: ClaimOnCreate): Promise<TxResult> {
  // A shared batch skips workflows locked elsewhere and gives each outcome a statement budget.
  const alone = inputs.every((i) => i.alone);
  return inWriterTransaction(deps, claim, async (client, w) => {
    const sorted = [...inputs].sort((a, b) => Number(BigInt(a.workflowId) - BigInt(b.workflowId)) || Number(BigInt(a.stepId) - BigInt(b.stepId)));
    // The first outcome of each workflow is recorded for all workflows in one statement, which
    // also locks the workflow rows. A further outcome of the same workflow is recorded only when
    // its turn comes: until then its step must still count as live, or a join could be created
    // before its branch moved on.
    const seen = new Set<string>();
    const first = sorted.filter((i) => i.guard === 'running' && !seen.has(i.workflowId) && seen.add(i.workflowId));
    const workflowIds = [...new Set(sorted.map((i) => i.workflowId))];
    const { workflows: locked, finished: firstRows } = await lockWorkflowsAndFinishSteps(client, deps.executorId, workflowIds, first.map(finishValues), {
      skipLocked: !alone,
    });
    // Workflows another transaction holds: recorded alone, once it lets go, without holding this batch.
    const lockedIds = new Set(locked.map((l) => l.id));
    const deferred = alone ? [] : sorted.filter((i) => !lockedIds.has(i.workflowId)).map((i) => ({ ...i, alone: true }));
    const runningIds = locked.filter((l) => l.status === 'running').map((l) => l.id);
    if (runningIds.length === 0) return deferred.length > 0 ? { ...empty(), deferred } : empty();
    for (const l of locked) w.setStepCount(l.id, l.step_count);
    const infos = await deps.cache.load(client, runningIds);
    const live = sorted.filter((i) => infos.has(i.workflowId));
    const finished = new Map<string, FinishedStep>(firstRows.map((row) => [row.id, row]));
    const firstIds = new Set(first.map((i) => i.stepId));
    const finishLater = async (i: FinishInput): Promise<FinishedStep | undefined> => {
      if (i.guard === 'running') return (await lockWorkflowsAndFinishSteps(client, deps.executorId, [i.workflowId], [finishValues(i)])).finished[0];
      if (i.guard === 'lease-expired') return finishStepIfLeaseExpired(client, finishValues(i));
      return finishGateIfExpired(client, finishValues(i));
    };

    const advances = new Map<string, Advance>();
    const budget = alone ? undefined : new OutcomeBudget(client, HEAVY_OUTCOME_STATEMENTS);
    for (const i of live) {
      if (!firstIds.has(i.stepId)) {
        const later = await finishLater(i);
        if (later) finished.set(later.id, later);
      }
      const row = finished.get(i.stepId);
      if (!row) continue;
      let advance = advances.get(i.workflowId);
      if (!advance) advances.set(i.workflowId, (advance = new Advance(budget ?? client, deps, infos.get(i.workflowId)!, w)));
      budget?.start(i.workflowId);
      await advance.afterOutcome(
        { id: row.id, name: row.name, attempt: row.attempt, args: row.args, fanoutId: row.fanout_id, itemIndex: row.item_index, firstAttemptId: row.first_attempt_id },
        i.outcome,
      );
    }
    await w.finish(deps.emitEvents);
    for (const [id, a] of advances) if (a.ended) deps.cache.forget(id);
    return {
      cancelledRunning: w.cancelledRunning,
      recorded: new Set(finished.keys()),
      createdWork: w.readyNow,
      claimed: w.claimed,
      ...(w.soonestDelayMs !== undefined ? { readyInMs: w.soonestDelayMs } : {}),
      ...(deferred.length > 0 ? { deferred } : {}),
    };
  });
}

/**
 * Runs `fn` in a transaction with a fresh TxWriter. If the transaction fails, the limits and
 * slots reserved for steps it claimed as it created them are given back.
 */
async function inWriterTransaction<T>(
  deps: TxDeps,
  claim: ClaimOnCreate | undefined,
  fn: (client: pg.PoolClient, w: TxWriter) => Promise<T>,
): Promise<T> {
  let writer: TxWriter | undefined;
  try {
    const result = await withTransaction(deps.pool, async (client) => {
      writer = new TxWriter(client, deps.schema, claim);
      return fn(client, writer);
    });
    const ended = (writer as TxWriter | undefined)?.endedWorkflows;
    if (ended && ended.length > 0) deps.onWorkflowsEnded?.(ended);
    return result;
  } catch (err) {
    writer?.releaseClaims();
    throw err;
  }
}


function stripInternal(error: ErrorData & { retryAfterMs?: number }): ErrorData {
  const { retryAfterMs: _ignored, ...rest } = error;
  return rest;
}

export interface Admission {
  admitted: number;
  /** First steps created already claimed by this executor. */
  claimed: CreatedClaim[];
  /** Whether first steps were created ready for the claim loop. */
  readyNow: boolean;
  readyInMs?: number;
}

/**
 * Admits up to `limit` new workflows in one transaction: validates each flow and creates its
 * first step. If the batch fails (a row the database refuses), each workflow is admitted in a
 * transaction of its own and the one that fails is failed with `admission_failed`, so a bad row
 * never stalls the others.
 */
export async function admitWorkflows(
  deps: TxDeps,
  limit: number,
  claim?: ClaimOnCreate,
): Promise<Admission> {
  try {
    return await admitBatch(deps, limit, claim);
  } catch (err) {
    if (isRetryablePgError(err)) throw err;
    deps.log.warn({ err }, 'admitting a batch of workflows failed; admitting them one by one');
    const out: Admission = { admitted: 0, claimed: [], readyNow: false };
    for (let i = 0; i < limit; i++) {
      let current: AdmittedWorkflow | undefined;
      try {
        const r = await admitBatch(deps, 1, claim, (row) => (current = row));
        if (r.admitted === 0) break;
        out.admitted += r.admitted;
        out.claimed.push(...r.claimed);
        out.readyNow ||= r.readyNow;
      } catch (oneErr) {
        if (!current || isRetryablePgError(oneErr)) throw oneErr;
        const failed: AdmittedWorkflow = current;
        deps.cache.forget(failed.id);
        const byDatabase = typeof oneErr === 'object' && oneErr !== null && 'severity' in oneErr;
        const error = { code: 'admission_failed', message: storableText(`${byDatabase ? 'the database refused to start this workflow' : 'starting this workflow failed'}: ${(oneErr as Error).message}`) };
        await withTransaction(deps.pool, (client) => failWorkflowIfActive(client, failed.id, error));
        deps.log.error({ err: oneErr, workflowId: failed.id }, 'workflow could not be admitted');
      }
    }
    return out;
  }
}

async function admitBatch(
  deps: TxDeps,
  limit: number,
  claim: ClaimOnCreate | undefined,
  onRow?: (row: AdmittedWorkflow) => void,
): Promise<Admission> {
  return inWriterTransaction(deps, claim, async (client, w) => {
    const rows = await admitNewWorkflowsResolvingRegisteredFlows(client, limit);
    for (const row of rows) {
      onRow?.(row);
      await admitOne(deps, client, row, w);
    }
    await w.finish(deps.emitEvents);
    return {
      admitted: rows.length,
      claimed: w.claimed,
      readyNow: w.readyNow,
      ...(w.soonestDelayMs !== undefined ? { readyInMs: w.soonestDelayMs } : {}),
    };
  });
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
  const compiled = deps.cache.compiler.compile(row.flow);
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
  const wf: WorkflowInfo = { id: row.id, name: row.name, input: row.input ?? {}, createdBy: row.created_by, flow: compiled.flow };
  deps.cache.put(wf);
  w.setStepCount(row.id, row.step_count);
  if (compiled.flow.timeoutMs !== undefined) await setWorkflowDeadline(client, row.id, compiled.flow.timeoutMs);
  const advance = new Advance(client, deps, wf, w);
  advance.event('workflow.started');
  await advance.createStep(compiled.flow.start, { fanoutId: null, itemIndex: null }, {});
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

/** An error whose issues may quote the client's text, made storable as jsonb. */
function storableProblem(error: (ErrorData & { issues: { path: string; message: string }[] }) | undefined): ErrorData | undefined {
  return error && { ...error, message: storableText(error.message), issues: storableIssues(error.issues) };
}

/** The workflow ran past its flow's `timeout`: fail it with `deadline`. */
export async function failOverdueWorkflow(deps: TxDeps, workflowId: string): Promise<TxResult> {
  const r = await withTransaction(deps.pool, async (client): Promise<TxResult> => {
    const [locked] = await lockWorkflows(client, [workflowId]);
    if (!locked || locked.status !== 'running') return empty();
    const error = { code: 'deadline', message: 'workflow ran past its timeout' };
    const cancelledRunning = await endWorkflowCancellingLiveSteps(client, workflowId, { status: 'failed', error });
    deps.cache.forget(workflowId);
    if (deps.emitEvents) {
      await notifyEvents(client, EVENTS_CHANNEL, [
        JSON.stringify({ type: 'workflow.failed', schema: deps.schema, workflowId, error, at: new Date().toISOString() }),
      ]);
    }
    deps.log.info({ workflowId, error }, 'workflow failed');
    return { ...empty(), cancelledRunning, recorded: new Set([workflowId]) };
  });
  if (r.recorded.size > 0) deps.onWorkflowsEnded?.([workflowId]);
  return r;
}
