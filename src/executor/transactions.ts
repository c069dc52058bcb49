/**
 * The executor's transactions. Each locks the workflow row first, so the transitions of one
 * workflow are serialized even across executors, then lets Advance decide and write.
 */
import type pg from 'pg';
import { withTransaction } from '../db/connect.js';
import {
  admitNewWorkflows,
  cancelLiveSteps,
  failWorkflowIfActive,
  finishGateIfExpired,
  finishStepIfLeaseExpired,
  finishStepIfRunning,
  lockWorkflow,
  notifyEvents,
  setWorkflowDeadline,
  type AdmittedWorkflow,
  type FinishValues,
  type FinishedStep,
} from '../db/queries.js';
import { isRetryablePgError, type ErrorData } from '../errors.js';
import { EVENTS_CHANNEL } from '../events.js';
import { compileFlow } from '../flow/validate.js';
import { Advance, type AdvanceDeps, type Outcome } from './advance.js';
import type { WorkflowCache, WorkflowInfo } from './workflowCache.js';

export interface TxDeps extends AdvanceDeps {
  pool: pg.Pool;
  cache: WorkflowCache;
  executorId: string;
}

export interface TxResult {
  /** Running steps this transaction cancelled; abort their tools. */
  cancelledRunning: string[];
  /** Whether the outcome was recorded (false: the step was no longer ours — a late result). */
  recorded: boolean;
  /** Whether this transaction created ready work (wake the claim loop). */
  createdWork: boolean;
}

export type FinishGuard = 'running' | 'lease-expired' | 'gate-expired';

export interface FinishInput {
  stepId: string;
  workflowId: string;
  guard: FinishGuard;
  outcome: Outcome;
  args?: unknown;
}

/** PostgreSQL refused a JSON value: `\u0000` in a string (22P05) or a lone surrogate (22P02). */
function isUnstorableJson(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22P05' || code === '22P02';
}

/**
 * Records `outcome` for a step (fenced by `guard`) and advances its workflow. An outcome
 * PostgreSQL cannot store (a tool result with a NUL character) fails the attempt with
 * `invalid_result` instead of leaving the step running until its lease runs out.
 */
export async function finishStep(deps: TxDeps, input: FinishInput): Promise<TxResult> {
  try {
    return await finishStepOnce(deps, input);
  } catch (err) {
    if (!isUnstorableJson(err)) throw err;
    deps.log.warn({ err, workflowId: input.workflowId, stepId: input.stepId }, 'step outcome cannot be stored; failing the step');
    const error = {
      code: 'invalid_result',
      message: `the step's outcome cannot be stored as PostgreSQL JSON: ${(err as Error).message}`,
      retryable: false,
    };
    return finishStepOnce(deps, { stepId: input.stepId, workflowId: input.workflowId, guard: input.guard, outcome: { status: 'failed', error } });
  }
}

async function finishStepOnce(deps: TxDeps, input: FinishInput): Promise<TxResult> {
  return withTransaction(deps.pool, async (client) => {
    const locked = await lockWorkflow(client, input.workflowId);
    if (!locked || locked.status !== 'running') return { cancelledRunning: [], recorded: false, createdWork: false };
    const wf = (await deps.cache.load(client, [input.workflowId])).get(input.workflowId);
    if (!wf) return { cancelledRunning: [], recorded: false, createdWork: false };

    const values: FinishValues =
      input.outcome.status === 'done'
        ? { id: input.stepId, status: 'done', result: input.outcome.result }
        : { id: input.stepId, status: 'failed', error: stripInternal(input.outcome.error) };
    if (input.args !== undefined) values.args = input.args;
    let finished: FinishedStep | undefined;
    if (input.guard === 'running') finished = await finishStepIfRunning(client, deps.executorId, values);
    else if (input.guard === 'lease-expired') finished = await finishStepIfLeaseExpired(client, values);
    else finished = await finishGateIfExpired(client, values);
    if (!finished) return { cancelledRunning: [], recorded: false, createdWork: false };

    const advance = new Advance(client, deps, wf, locked.step_count);
    await advance.afterOutcome(
      { id: finished.id, name: finished.name, attempt: finished.attempt, args: finished.args, fanoutId: finished.fanout_id, itemIndex: finished.item_index },
      input.outcome,
    );
    await advance.finish();
    if (advance.ended) deps.cache.forget(wf.id);
    return { cancelledRunning: advance.cancelledRunning, recorded: true, createdWork: !advance.ended };
  });
}

function stripInternal(error: ErrorData & { retryAfterMs?: number }): ErrorData {
  const { retryAfterMs: _ignored, ...rest } = error;
  return rest;
}

/**
 * Admits up to `limit` new workflows in one transaction: validates each flow and creates its
 * first step. If the batch fails (a row the database refuses), each workflow is admitted in a
 * transaction of its own and the one that fails is failed with `admission_failed`, so a bad row
 * never stalls the others.
 */
export async function admitWorkflows(deps: TxDeps, limit: number): Promise<{ admitted: number; cancelledRunning: string[] }> {
  try {
    return await withTransaction(deps.pool, async (client) => {
      const rows = await admitNewWorkflows(client, limit);
      const events: string[] = [];
      for (const row of rows) events.push(...(await admitOne(deps, client, row)));
      if (deps.emitEvents) await notifyEvents(client, EVENTS_CHANNEL, events);
      return { admitted: rows.length, cancelledRunning: [] };
    });
  } catch (err) {
    if (isRetryablePgError(err)) throw err;
    deps.log.warn({ err }, 'admitting a batch of workflows failed; admitting them one by one');
    let admitted = 0;
    for (let i = 0; i < limit; i++) {
      let current: AdmittedWorkflow | undefined;
      try {
        const n = await withTransaction(deps.pool, async (client) => {
          const [row] = await admitNewWorkflows(client, 1);
          if (!row) return 0;
          current = row;
          const events = await admitOne(deps, client, row);
          if (deps.emitEvents) await notifyEvents(client, EVENTS_CHANNEL, events);
          return 1;
        });
        if (n === 0) break;
        admitted += n;
      } catch (oneErr) {
        if (!current || isRetryablePgError(oneErr)) throw oneErr;
        const failed = current;
        deps.cache.forget(failed.id);
        const error = { code: 'admission_failed', message: `the database refused to start this workflow: ${(oneErr as Error).message}` };
        await withTransaction(deps.pool, (client) => failWorkflowIfActive(client, failed.id, error));
        deps.log.error({ err: oneErr, workflowId: failed.id }, 'workflow could not be admitted');
      }
    }
    return { admitted, cancelledRunning: [] };
  }
}

/** Admits one locked `new` workflow: invalid flows fail at once; valid ones get their first step. */
async function admitOne(deps: TxDeps, client: pg.PoolClient, row: AdmittedWorkflow): Promise<string[]> {
  const compiled = compileFlow(row.flow);
  if (!compiled.ok) {
    const error = { code: 'invalid_flow', message: `flow is invalid: ${compiled.issues.length} issue(s)`, issues: compiled.issues };
    await failWorkflowIfActive(client, row.id, error);
    deps.log.warn({ workflowId: row.id, workflow: row.name, issues: compiled.issues }, 'workflow rejected: invalid flow');
    return [JSON.stringify({ type: 'workflow.failed', schema: deps.schema, workflowId: row.id, error: { code: error.code, message: error.message }, at: new Date().toISOString() })];
  }
  const wf: WorkflowInfo = { id: row.id, name: row.name, input: row.input ?? {}, createdBy: row.created_by, flow: compiled.flow };
  deps.cache.put(wf);
  if (compiled.flow.timeoutMs !== undefined) await setWorkflowDeadline(client, row.id, compiled.flow.timeoutMs);
  const advance = new Advance(client, { ...deps, emitEvents: false }, wf, row.step_count);
  advance.event('workflow.started');
  await advance.createStep(compiled.flow.start, { fanoutId: null, itemIndex: null }, {});
  await advance.flush();
  if (advance.ended) deps.cache.forget(wf.id);
  deps.log.info({ workflowId: row.id, workflow: row.name, user: row.created_by }, 'workflow started');
  return advance.events.map((e) => JSON.stringify(e));
}

/** The workflow ran past its flow's `timeout`: fail it with `deadline`. */
export async function failOverdueWorkflow(deps: TxDeps, workflowId: string): Promise<TxResult> {
  return withTransaction(deps.pool, async (client) => {
    const locked = await lockWorkflow(client, workflowId);
    if (!locked || locked.status !== 'running') return { cancelledRunning: [], recorded: false, createdWork: false };
    const cancelledRunning = await cancelLiveSteps(client, workflowId);
    const error = { code: 'deadline', message: 'workflow ran past its timeout' };
    await failWorkflowIfActive(client, workflowId, error);
    deps.cache.forget(workflowId);
    if (deps.emitEvents) {
      await notifyEvents(client, EVENTS_CHANNEL, [
        JSON.stringify({ type: 'workflow.failed', schema: deps.schema, workflowId, error, at: new Date().toISOString() }),
      ]);
    }
    deps.log.info({ workflowId, error }, 'workflow failed');
    return { cancelledRunning, recorded: true, createdWork: false };
  });
}
