/**
 * What happens after a step: a pure function of the compiled flow, the step, and its outcome.
 * No I/O. The executor applies the decision in one transaction (executor/applyOutcome.ts).
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

/** After an attempt failed with `error` (retryable or not). */
export function resolveFailure(
  flow: CompiledFlow,
  stepName: string,
  attempt: number,
  error: ErrorData & { retryAfterMs?: number },
  random: number,
): Decision {
  const step = getStep(flow, stepName);
  const retryable = error.retryable === true;
  if (retryable && attempt < step.retry.maxAttempts) {
    // A step whose executor died (`lost`) did nothing wrong: it runs again at once (the attempt
    // still counts). Everything else backs off.
    const backoff = error.code === 'lost' ? 0 : backoffMs(step.retry, attempt, random);
    const delayMs = typeof error.retryAfterMs === 'number' && error.retryAfterMs > backoff ? error.retryAfterMs : backoff;
    return { kind: 'retry', delayMs };
  }
  const data: ErrorData = { ...error, step: stepName, attempt };
  if (step.onError !== undefined) return { kind: 'goto', to: step.onError, error: data };
  return { kind: 'failBranch', error: data };
}
