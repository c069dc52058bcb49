/**
 * Runs one claimed step: a tool call under its timeout and AbortSignal, or the instant
 * completion of a readied gate or a due timer. Never throws: every failure becomes an Outcome.
 */
import { coerceError, StepError, StepTimeoutError } from '../../errors.js';
import type { CompiledStep } from '../../flow/compiled.js';
import type { ClaimedStep } from '../../db/queries.js';
import type { ToolRegistry } from '../../tools/registry.js';
import type { ToolContext } from '../../tools/tool.js';
import { valueCapError, type Caps } from '../../flow/caps.js';
import type { Outcome } from '../transitions/advance.js';
import { signalOutcome } from '../transitions/signalWaits.js';
import type { StepProgressSink } from './stepProgress.js';
import type { StepTrace } from '../../telemetry/stepTracing.js';
import { addUsage, outcomeUsage, type StepUsage } from '../../usage/stepUsage.js';

export interface StepPolicy {
  /** Throws StepError('permission_denied') when `user` may not call `tool`. */
  check(user: string | null, tool: string): void;
}

export interface RunStepDeps {
  tools: ToolRegistry;
  permissions?: StepPolicy;
  /**
   * Runs a claimed sub-workflow step (src/executor/transitions/subWorkflows.ts): its outcome, or undefined
   * when it started its child and now waits for it.
   */
  subWorkflow?: (row: ClaimedStep, step: CompiledStep) => Promise<Outcome | undefined>;
  /**
   * Runs a claimed step of a worker tool (src/executor/steps/workerTaskStep.ts): hands it to the
   * workers (undefined) or returns the outcome a worker reported.
   */
  workerTask?: (row: ClaimedStep, step: CompiledStep, served: { timeoutMs?: number }) => Promise<Outcome | undefined>;
  /** Where a tool call's progress reports go (one sink per attempt); none: they are dropped. */
  progress?: (row: ClaimedStep) => StepProgressSink;
  /** The trace span of this step attempt: the tool call runs in a child span whose traceparent the tool passes on. */
  trace?: StepTrace;
  /**
   * Called before a model call (a `llm.*` tool) starts: throws StepError `budget_exceeded` when
   * the workflow's cost has passed its budget (src/executor/steps/costBudget.ts). None: no check.
   */
  costBudget?: (row: ClaimedStep) => Promise<void>;
}

/**
 * The outcome of a claimed step of a running workflow: its step looked up in the frozen flow
 * (a row the flow does not know fails with `unknown_step`), run, and a result above
 * `caps.resultBytes` turned into a failure.
 */
export async function runClaimedStep(
  deps: RunStepDeps,
  row: ClaimedStep,
  flowStep: CompiledStep | undefined,
  caps: Readonly<Caps>,
  signal: AbortSignal,
): Promise<Outcome | undefined> {
  if (!flowStep) {
    return { status: 'failed', error: { code: 'unknown_step', message: `step "${row.name.slice(0, 200)}" is not in the workflow's flow`, retryable: false } };
  }
  const outcome = await runStep(deps, row, flowStep, signal);
  if (outcome === undefined) return undefined;
  const tooLarge = outcome.status === 'done' ? valueCapError(`the result of step "${row.name}"`, outcome.result, 'resultBytes', caps) : undefined;
  return tooLarge ? { status: 'failed', error: tooLarge } : outcome;
}

/** The outcome of one claimed step; undefined when it has none yet (a sub-workflow step that started its child). */
export async function runStep(deps: RunStepDeps, row: ClaimedStep, step: CompiledStep, signal: AbortSignal): Promise<Outcome | undefined> {
  const spent: { usage?: StepUsage } = {};
  const outcome = await runStepOnce(deps, row, step, signal, spent);
  // Only a tool's word counts: a gate's or a signal's result is a client's, and a sub-workflow
  // step takes its child's usage in the database (sql/0030).
  const usage = outcome && step.kind === 'tool' ? outcomeUsage(outcome, spent.usage) : undefined;
  return usage && outcome ? { ...outcome, usage } : outcome;
}

async function runStepOnce(deps: RunStepDeps, row: ClaimedStep, step: CompiledStep, signal: AbortSignal, spent: { usage?: StepUsage }): Promise<Outcome | undefined> {
  try {
    switch (step.kind) {
      case 'gate':
        return gateOutcome(row.result);
      case 'timer':
        return { status: 'done', result: null };
      case 'signal':
        return signalOutcome(row.result);
      case 'fork':
      case 'pass':
        return { status: 'done', result: row.result ?? null };
      case 'tool': {
        const served = step.tool !== null && deps.workerTask ? deps.tools.servedByWorkers(step.tool) : undefined;
        if (served && deps.workerTask) return await deps.workerTask(row, step, served);
        return { status: 'done', result: await callTool(deps, row, step, signal, spent) };
      }
      case 'workflow':
        if (!deps.subWorkflow) throw new StepError('bad_step', `step "${row.name}" starts a sub-workflow, which this runner cannot do`);
        return await deps.subWorkflow(row, step);
    }
  } catch (err) {
    const e = coerceError(err);
    const error = { ...e.toJSON(), retryable: e.retryable };
    const retryAfterMs = (e as { retryAfterMs?: unknown }).retryAfterMs ?? (e.details as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
    return { status: 'failed', error: typeof retryAfterMs === 'number' ? { ...error, retryAfterMs } : error };
  }
}

/** A readied gate: the readier's result, else approval; `approved: false` is a rejection. */
export function gateOutcome(result: unknown): Outcome {
  const value = result ?? { approved: true };
  if (typeof value === 'object' && value !== null && (value as { approved?: unknown }).approved === false) {
    const reason = (value as { reason?: unknown }).reason;
    return {
      status: 'failed',
      error: { code: 'rejected', message: typeof reason === 'string' && reason ? `rejected: ${reason}` : 'rejected', retryable: false, details: value },
    };
  }
  return { status: 'done', result: value };
}

async function callTool(deps: RunStepDeps, row: ClaimedStep, step: CompiledStep, signal: AbortSignal, spent: { usage?: StepUsage }): Promise<unknown> {
  // The frozen flow decides which tool runs; the row only records it.
  const tool = step.tool;
  if (!tool) throw new StepError('bad_step', `step "${row.name}" has no tool`);
  if (row.tool !== null && row.tool !== tool) {
    throw new StepError('step_mismatch', `step "${row.name}" row names tool "${row.tool}" but the flow says "${tool}"; refusing to run it`);
  }
  deps.permissions?.check(row.created_by, tool);
  if (deps.costBudget && isModelCall(tool)) await deps.costBudget(row);
  // An instant tool (core.echo, core.noop, core.fail: no I/O, no timer) answers before any
  // timeout could fire or an abort could matter: no timer, no second controller, no race.
  if (deps.tools.isInstant(tool) && !deps.trace) return deps.tools.call(tool, row.args ?? {}, toolContext(row, signal));

  // One controller for the call, aborted by the step's signal or by the timeout (AbortSignal.any
  // would do the same at several microseconds and a weak reference per call).
  const call = new AbortController();
  let rejectCall: (err: Error) => void = () => {};
  const stopped = new Promise<never>((_, reject) => (rejectCall = reject));
  const stop = (err: Error) => {
    if (call.signal.aborted) return;
    call.abort(err);
    rejectCall(err);
  };
  const onAbort = () => stop(signal.reason instanceof Error ? signal.reason : new StepError('aborted', 'step was aborted', { retryable: true }));
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => stop(new StepTimeoutError(step.timeoutMs)), step.timeoutMs);
  const progress = deps.progress?.(row);
  try {
    // A tool that ignores its signal must not hold the step past its timeout.
    const invoke = (traceparent: string | undefined) =>
      deps.tools.call(tool, row.args ?? {}, {
        ...toolContext(row, call.signal),
        reportUsage: (usage: StepUsage) => {
          spent.usage = addUsage(spent.usage, usage);
        },
        ...(progress ? { onProgress: progress.report } : {}),
        ...(traceparent ? { traceparent } : {}),
      });
    return await Promise.race([deps.trace ? deps.trace.toolCall(tool, invoke) : invoke(undefined), stopped]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    // Nobody waits on it any longer; keep a late abort from being an unhandled rejection.
    stopped.catch(() => {});
    // The last report is written before the outcome is queued (the write is fenced on the running attempt in any case).
    await progress?.close();
  }
}

/** Whether `tool` calls a model (the built-in `llm.*`): a cost budget is checked before it starts. */
function isModelCall(tool: string): boolean {
  return tool.startsWith('llm.');
}

/** What a tool is told about the call: the step, its attempt and user, its idempotency key. */
function toolContext(row: ClaimedStep, signal: AbortSignal): ToolContext {
  return {
    workflowId: row.workflow_id,
    stepId: row.id,
    stepName: row.name,
    attempt: row.attempt,
    user: row.created_by,
    idempotencyKey: `${row.workflow_id}:${row.name}:${row.first_attempt_id ?? row.id}`,
    signal,
  };
}
