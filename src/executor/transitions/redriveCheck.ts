/**
 * Whether a failed workflow can be redriven, and its plan: the one check shared by the executor
 * (which decides) and the callers that ask first (`stepd retry`, the API's retryWorkflow), so a
 * refusal reads the same wherever it comes from. Pure: the caller reads the rows.
 */
import type { ErrorData } from '../../errors.js';
import type { CompiledFlow } from '../../flow/compiled.js';
import type { FlowIssue } from '../../flow/spec.js';
import type { CompileResult } from '../../flow/validate.js';
import { planRedrive, plannedRows, type RedriveAction, type RedriveStepRow } from './redrivePlan.js';

export interface RedriveSubject {
  flow: unknown;
  error: ErrorData | null;
  step_count: number;
}

export type RedriveCheck =
  | { ok: true; flow: CompiledFlow; reopen: string[]; actions: RedriveAction[] }
  | { ok: false; reason: string; message: string; issues?: FlowIssue[] };

/** The error the workflow failed with, looking through earlier refused redrives. */
export function originalError(error: ErrorData | null): ErrorData | null {
  if (error?.code === 'redrive_refused' || error?.code === 'redrive_failed') {
    const inner = (error.details as { error?: ErrorData | null } | undefined)?.error;
    if (inner !== undefined) return inner;
  }
  return error;
}

/**
 * Checks a failed workflow against today's validation and caps (`compile`), then plans what its
 * redrive would run again (redrivePlan.ts) and checks that against its step budget.
 */
export function checkRedrive(wf: RedriveSubject, steps: readonly RedriveStepRow[], compile: (flow: unknown) => CompileResult): RedriveCheck {
  if (wf.flow === null || wf.flow === undefined) {
    return { ok: false, reason: 'not_admitted', message: 'the workflow failed before it was admitted; start a new one' };
  }
  const compiled = compile(wf.flow);
  if (!compiled.ok) {
    return {
      ok: false,
      reason: 'invalid_flow',
      message: `its flow is not valid under today's validation and caps (${compiled.issues.length} issue(s))`,
      issues: compiled.issues,
    };
  }
  const plan = planRedrive(compiled.flow, steps, originalError(wf.error));
  if (!plan.ok) return plan;
  const max = compiled.flow.maxSteps;
  if (wf.step_count + plannedRows(plan) > max) {
    return { ok: false, reason: 'step_limit', message: `the new attempts would go over the step budget of ${max} step rows (${wf.step_count} used)` };
  }
  return { ok: true, flow: compiled.flow, reopen: plan.reopen, actions: plan.actions };
}
