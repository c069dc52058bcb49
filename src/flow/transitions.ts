/**
 * What happens after a step: a pure function of the compiled flow, the step, and its outcome.
 * No I/O. The executor applies the decision in one transaction (src/executor/transitions/advance.ts).
 */
import { StepError, type ErrorData } from '../errors.js';
import type { CompiledFlow, CompiledStep, RetryPolicy } from './compiled.js';
import { getStep } from './compiled.js';
import { resolveTemplates, type TemplateScope } from './templates.js';
import { CapExceededError, valueCapError } from './caps.js';

export type Decision =
  /** Create these steps next, in the same branch (fan-out and item) as the finished one. */
  | { kind: 'goto'; to: string; error?: ErrorData }
  /** `branches`: those whose condition held, in listed order; at most `concurrency` start at once. */
  | { kind: 'parallel'; branches: string[]; concurrency?: number }
  | { kind: 'forEach'; items: unknown[]; step: string; concurrency: number }
  /** The chain ended: arrive at the enclosing fan-out's join, or end the workflow with `output`. */
  | { kind: 'arrive'; output: unknown }
  | { kind: 'complete'; output: unknown }
  | { kind: 'failWorkflow'; error: ErrorData }
  /** Another attempt of the same step after `delayMs`. */
  | { kind: 'retry'; delayMs: number }
  /**
   * Failed for good: fail the enclosing fan-out (or the workflow), unless it runs allSettled.
   * `transition`: the step succeeded but what follows it could not be resolved (no branch
   * matched, items not a list, a template error): its row is marked failed inside a fan-out.
   */
  | { kind: 'failBranch'; error: ErrorData; transition?: true };

/** The exponential backoff before attempt `attempt + 1`; `random` in [0, 1). */
export function backoffMs(policy: RetryPolicy, attempt: number, random: number): number {
  const base = Math.min(policy.maxMs, policy.initialMs * Math.pow(policy.multiplier, Math.max(0, attempt - 1)));
  // Full jitter within [base/2, base]: spreads retries without ever retrying at once.
  return Math.round(policy.jitter ? base / 2 + (base / 2) * random : base);
}

function stepErrorData(err: unknown, step: string): ErrorData {
  if (err instanceof StepError) return { ...err.toJSON(), step };
  return { code: 'internal', message: err instanceof Error ? err.message : String(err), step };
}

/** After a step succeeded with `scope.result`. */
export function resolveSuccess(flow: CompiledFlow, stepName: string, scope: TemplateScope): Decision {
  const step = getStep(flow, stepName);
  const t = step.transition;
  try {
    switch (t.kind) {
      case 'next':
        return { kind: 'goto', to: t.to };
      case 'branch': {
        const vars = scope as Record<string, unknown>;
        for (const c of t.cases) if (c.condition.evaluate(vars)) return { kind: 'goto', to: c.then };
        if (t.default !== undefined) return { kind: 'goto', to: t.default };
        return {
          kind: 'failBranch',
          transition: true,
          error: {
            code: 'no_branch_matched',
            message: `no branch of step "${stepName}" matched its result and it has no default`,
            step: stepName,
            details: { result: scope.result ?? null },
          },
        };
      }
      case 'parallel': {
        const conditions = t.conditions;
        const vars = scope as Record<string, unknown>;
        const branches = conditions ? t.branches.filter((_, i) => conditions[i]?.evaluate(vars) ?? true) : t.branches;
        return { kind: 'parallel', branches, ...(t.concurrency !== undefined ? { concurrency: t.concurrency } : {}) };
      }
      case 'forEach': {
        const items = resolveTemplates(t.items, scope);
        if (!Array.isArray(items)) {
          return {
            kind: 'failBranch',
            transition: true,
            error: { code: 'invalid_items', message: `forEach.items of step "${stepName}" is not an array`, step: stepName, details: { items } },
          };
        }
        const cap = flow.caps?.forEachItems;
        if (cap !== undefined && items.length > cap) {
          throw new CapExceededError(`forEach of step "${stepName}" has ${items.length} items, above the operator's cap caps.forEachItems (${cap})`, {
            cap: 'forEachItems',
            limit: cap,
            actual: items.length,
          });
        }
        return { kind: 'forEach', items, step: t.step, concurrency: t.concurrency };
      }
      case 'done':
        if (t.status === 'failed') {
          const given = typeof t.error === 'object' ? t.error : { code: 'failed_by_flow', message: t.error ?? `step "${stepName}" failed the workflow` };
          return { kind: 'failWorkflow', error: { ...given, step: stepName } };
        }
        return { kind: 'complete', output: checkedOutput(flow, outputOf(step, scope)) };
      case 'arrive':
        return { kind: 'arrive', output: outputOf(step, scope) };
    }
  } catch (err) {
    return { kind: 'failBranch', transition: true, error: stepErrorData(err, stepName) };
  }
}

/** The workflow's output, unless it is above caps.outputBytes (then the workflow fails with cap_exceeded). */
export function checkedOutput(flow: CompiledFlow, output: unknown): unknown {
  const problem = flow.caps ? valueCapError('the workflow output', output, 'outputBytes', flow.caps) : undefined;
  if (problem) throw new CapExceededError(problem.message, problem.details as { cap: string; limit: number });
  return output;
}

function outputOf(step: CompiledStep, scope: TemplateScope): unknown {
  return step.output === undefined ? (scope.result ?? null) : resolveTemplates(step.output, scope);
}

/**
 * Whether deciding after a failure of attempt `attempt` needs the number of earlier attempts of
 * the step that were lost (resolveFailure's `lostBefore`): only when they could change the answer.
 */
export function failureNeedsLostCount(flow: CompiledFlow, stepName: string, attempt: number, error: ErrorData): boolean {
  if (attempt <= 1 || error.retryable !== true) return false;
  return error.code === 'lost' || attempt >= getStep(flow, stepName).retry.maxAttempts;
}

/**
 * After an attempt failed with `error` (retryable or not). A lost attempt (`lost`: the executor
 * or worker running it died, or stopped answering) is the platform's failure, not the step's: it
 * runs again at once and does not spend `retry.maxAttempts`; lost attempts have their own bound,
 * `retry.maxLost` (a step that kills whatever runs it still ends). `lostBefore`: the step's
 * earlier attempts that were lost (0 when failureNeedsLostCount says it does not matter).
 */
export function resolveFailure(
  flow: CompiledFlow,
  stepName: string,
  attempt: number,
  error: ErrorData & { retryAfterMs?: number },
  random: number,
  lostBefore = 0,
): Decision {
  const step = getStep(flow, stepName);
  const retryable = error.retryable === true;
  const lost = error.code === 'lost';
  if (retryable && lost && lostBefore + 1 < step.retry.maxLost) return { kind: 'retry', delayMs: 0 };
  if (retryable && !lost && attempt - lostBefore < step.retry.maxAttempts) {
    const backoff = backoffMs(step.retry, attempt, random);
    const delayMs = typeof error.retryAfterMs === 'number' && error.retryAfterMs > backoff ? error.retryAfterMs : backoff;
    return { kind: 'retry', delayMs };
  }
  if (retryable && lost) {
    const bound = `lost ${lostBefore + 1} times (retry.maxLost is ${step.retry.maxLost})`;
    error = { ...error, message: `${error.message}; ${bound}`, retryable: false, details: { lostAttempts: lostBefore + 1, maxLost: step.retry.maxLost } };
  }
  const data: ErrorData = { ...error, step: stepName, attempt };
  if (step.onError !== undefined) return { kind: 'goto', to: step.onError, error: data };
  return { kind: 'failBranch', error: data };
}
