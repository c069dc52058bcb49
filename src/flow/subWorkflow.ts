/**
 * Sub-workflow steps, the pure part: what a `{ "workflow": { name, version?, input } }` step may
 * be combined with, the request a step row records (its `args`), and how the child's outcome
 * becomes the step's outcome. No I/O: the executor side is src/executor/transitions/subWorkflows.ts.
 */
import { StepError, type ErrorData } from '../errors.js';
import type { CompiledStep } from './compiled.js';
import type { FlowIssue, StepSpec } from './spec.js';
import { resolveTemplates, type TemplateScope } from './templates.js';

/**
 * A sub-workflow step whose child could not start (unknown flow, too deep): the step fails with
 * `cause`'s code, and its failed row still records the request, so a redrive starts the child
 * with the same input.
 */
export class ChildStartError extends StepError {
  constructor(
    cause: StepError,
    readonly request: SubWorkflowRequest,
  ) {
    super(cause.code, cause.message, { retryable: cause.retryable, details: cause.details, cause });
    this.name = 'ChildStartError';
  }
}

/** What a sub-workflow step row records as its `args`: the request, its input resolved. */
export interface SubWorkflowRequest {
  workflow: string;
  version: number | null;
  input: Record<string, unknown>;
}

/** The child's outcome, as the database writes it on the waiting step when the child finishes (sql/0011). */
export interface ChildOutcome {
  workflowId: string;
  status: 'completed' | 'failed' | 'cancelled';
  output?: unknown;
  error?: (ErrorData & { step?: string }) | null;
}

export type SettledOutcome = { status: 'done'; result: unknown } | { status: 'failed'; error: ErrorData };

/** Issues of combining `workflow` with what a sub-workflow step cannot have. */
export function subWorkflowShapeIssues(s: StepSpec, at: string, has: { hasTool: boolean; isFork: boolean }): FlowIssue[] {
  const issues: FlowIssue[] = [];
  const refuse = (key: string, message: string) => issues.push({ path: `${at}.${key}`, message });
  if (has.hasTool) refuse('workflow', 'a step cannot have both a tool and a workflow; put them in two steps');
  if (has.isFork) refuse('workflow', 'a sub-workflow step cannot also fan out; fan out in a step of its own and name the sub-workflow step in forEach.step or parallel');
  if (s.approval !== undefined) refuse('approval', 'a sub-workflow step cannot also be an approval; put the gate in a step of its own (or inside the child flow)');
  if (s.wait !== undefined) refuse('wait', 'a sub-workflow step cannot also wait; put the timer in a step of its own');
  if (s.timeout !== undefined) refuse('timeout', 'a sub-workflow step has no timeout of its own; give the child flow a "timeout"');
  const input = s.workflow?.input;
  if (input !== undefined && !isObject(input) && !isOneTemplate(input)) {
    refuse('workflow.input', 'workflow.input must be an object or a single template such as "{{input.order}}"');
  }
  return issues;
}

/** The request of a step about to start its child: the input template resolved in `scope`. */
export function subWorkflowRequest(step: CompiledStep, scope: TemplateScope): SubWorkflowRequest {
  const spec = step.workflow;
  if (!spec) throw new Error(`step "${step.name}" is not a sub-workflow step`);
  const input = resolveTemplates(spec.input, scope);
  if (!isObject(input)) {
    throw new StepError('invalid_input', `workflow.input of step "${step.name}" must resolve to an object (got ${describe(input)})`, {
      retryable: false,
    });
  }
  return { workflow: spec.name, version: spec.version, input };
}

/**
 * The input a retry (or any later attempt) starts its child with: the one its row recorded.
 * Undefined when the row recorded none (its input template failed when the step was created).
 */
export function recordedInput(args: unknown): Record<string, unknown> | undefined {
  const input = isObject(args) && typeof args.workflow === 'string' ? args.input : undefined;
  return isObject(input) ? input : undefined;
}

/**
 * The step's outcome from the child's: its output is the result; its failure the step's error
 * (retryable when the child's was, so the step's `retry` starts a new child); a cancelled child
 * fails the step with `cancelled`.
 */
export function settledOutcome(value: unknown): SettledOutcome {
  const child = (isObject(value) ? value : {}) as Partial<ChildOutcome>;
  const workflowId = typeof child.workflowId === 'string' ? child.workflowId : null;
  const label = workflowId === null ? 'the sub-workflow' : `sub-workflow ${workflowId}`;
  if (child.status === 'completed') return { status: 'done', result: child.output ?? null };
  if (child.status === 'cancelled') {
    return {
      status: 'failed',
      error: { code: 'cancelled', message: `${label} was cancelled`, retryable: false, details: { workflowId } },
    };
  }
  const err = isObject(child.error) ? (child.error as ErrorData) : undefined;
  const code = typeof err?.code === 'string' ? err.code : 'child_failed';
  const message = typeof err?.message === 'string' ? err.message : 'the sub-workflow failed';
  const error: ErrorData = {
    code,
    message: `${label} failed: ${message}`,
    // A child that failed for a transient cause may succeed as a new child: the step's retry decides.
    retryable: err?.retryable === true,
    details: {
      workflowId,
      ...(typeof err?.step === 'string' ? { step: err.step } : {}),
      ...(err?.details !== undefined ? { details: err.details } : {}),
    },
  };
  if (Array.isArray(err?.issues)) error.issues = err.issues;
  return { status: 'failed', error };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isOneTemplate(v: unknown): boolean {
  return typeof v === 'string' && v.startsWith('{{') && v.endsWith('}}') && v.indexOf('{{', 2) < 0;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}
