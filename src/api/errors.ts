/**
 * Errors of the workflow operations (src/api/operations.ts), as data: a stable `code` that the
 * MCP server and the dashboard map to their own error shapes, the CLI's wording as `message`,
 * and `details` for a program. The wording lives in the message builders below, shared with the
 * CLI, so a refusal reads the same from `stepd approve`, an MCP tool and a dashboard button.
 */
import { isConnectionError } from '../db/connectionErrors.js';
import type { FlowIssue } from '../flow/spec.js';

export type OperationErrorCode =
  /** The workflow or step does not exist. */
  | 'not_found'
  /** A malformed argument (an id that is not a number, input that is not an object…). */
  | 'invalid_input'
  /** The flow has issues; `details.issues` lists them with their paths. */
  | 'invalid_flow'
  /** The user may not do this (a tool the flow calls, a gate's approvers). */
  | 'permission_denied'
  /** The row is not in a state that allows it (approving a step that is not pending…). */
  | 'refused'
  /** The operation needs something this database or build does not have yet. */
  | 'not_supported'
  /** The database cannot be reached; trying again later may work. */
  | 'unavailable'
  /** Anything else (a bug): the message says what happened. */
  | 'internal';

export class OperationError extends Error {
  readonly code: OperationErrorCode;
  readonly retryable: boolean;
  readonly details: unknown;

  constructor(code: OperationErrorCode, message: string, options: { details?: unknown; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OperationError';
    this.code = code;
    this.retryable = code === 'unavailable';
    this.details = options.details;
  }

  toJSON(): { code: string; message: string; retryable: boolean; details?: unknown } {
    return { code: this.code, message: this.message, retryable: this.retryable, ...(this.details !== undefined ? { details: this.details } : {}) };
  }
}

/** Converts anything a database call threw into an OperationError, once. */
export function toOperationError(err: unknown): OperationError {
  if (err instanceof OperationError) return err;
  if (isConnectionError(err)) return new OperationError('unavailable', `cannot reach the database: ${(err as Error).message}`, { cause: err });
  const code = (err as { code?: unknown } | null)?.code;
  // The guard triggers raise check_violation with a message naming the rule.
  if (code === '23514' || code === '23505') return new OperationError('refused', (err as Error).message, { cause: err });
  // 54000: a value over the operator's caps, refused by the database before any work (sql/0021).
  if (code === '22P02' || code === '22003' || code === '54000') return new OperationError('invalid_input', (err as Error).message, { cause: err });
  // 42501: a missing grant, or a tenant rule (sql/0038: cancel or ready only what the role acts for); the hint says who may.
  if (code === '42501') {
    const hint = (err as { hint?: unknown }).hint;
    return new OperationError('permission_denied', typeof hint === 'string' && hint !== '' ? `${(err as Error).message}. ${hint}` : (err as Error).message, { cause: err });
  }
  return new OperationError('internal', err instanceof Error ? err.message : String(err), { cause: err });
}

/** The HTTP status for an error code (for the dashboard's JSON answers). */
export function httpStatusFor(code: OperationErrorCode): number {
  switch (code) {
    case 'not_found':
      return 404;
    case 'invalid_input':
    case 'invalid_flow':
      return 400;
    case 'permission_denied':
      return 403;
    case 'refused':
      return 409;
    case 'not_supported':
      return 501;
    case 'unavailable':
      return 503;
    case 'internal':
      return 500;
  }
}

// ---------------------------------------------------------------------------------------------
// Wording shared with the CLI.

export function workflowNotFoundMessage(id: string, schema: string): string {
  return `workflow ${id} does not exist in schema "${schema}" (list them with: stepd list)`;
}

export function stepNotFoundMessage(id: string, schema: string): string {
  return `step ${id} does not exist in schema "${schema}" (see the step ids with: stepd status WORKFLOW_ID)`;
}

/** Why a step that is not pending cannot be approved or rejected (`verb`). */
export function stepNotPendingMessage(
  step: { id: string; name: string; workflow_id: string; status: string; workflow_status: string; readied_at: Date | null; readied_by: string | null },
  verb: 'approved' | 'rejected',
): string {
  const what = `step ${step.id} (${step.name}, workflow ${step.workflow_id})`;
  const why =
    step.status === 'cancelled' ? `${what} was cancelled (the workflow is ${step.workflow_status})` :
    step.status === 'ready' && step.readied_at ? `${what} was already readied${step.readied_by ? ` by ${step.readied_by}` : ''}` :
    `${what} is ${step.status}`;
  return `${why}; only a pending step can be ${verb}`;
}

export function workflowNotActiveMessage(wf: { id: string; name: string; status: string }): string {
  return `workflow ${wf.id} (${wf.name}) is already ${wf.status}; only a new or running workflow can be cancelled`;
}

/** Why a user may not cancel or retry (`verb`) a workflow another user created. */
export function notYourWorkflowMessage(wf: { id: string; name: string; created_by: string | null }, user: string, verb: 'cancel' | 'retry'): string {
  const owner = wf.created_by === null ? 'no user' : `user "${wf.created_by}"`;
  return `user "${user}" may not ${verb} workflow ${wf.id} (${wf.name}): it was started by ${owner}; only its own user or an admin (config api.admins) may cancel or retry it`;
}

/** Why a workflow that is not failed cannot be redriven (`stepd retry`, retry_workflow). */
export function workflowNotFailedMessage(wf: { id: string; name: string; status: string; redrive_requested_at?: Date | null }): string {
  const note = wf.status === 'running' && wf.redrive_requested_at ? ' (its redrive was requested already)' : '';
  return `workflow ${wf.id} (${wf.name}) is ${wf.status}${note}; only a failed workflow can be redriven`;
}

/** Why a failed workflow cannot be redriven (its flow no longer valid, nothing to run again…). */
export function cannotRedriveMessage(wf: { id: string; name: string }, reason: string, issues?: readonly FlowIssue[]): string {
  const list = issues?.length ? `\n${issues.map((i) => `  ${i.path || '(flow)'}: ${i.message}`).join('\n')}` : '';
  return `workflow ${wf.id} (${wf.name}) cannot be redriven: ${reason}${list}`;
}

/** `what` names the flow: a file name, `the flow`, `flow "NAME"`. */
export function invalidFlowMessage(what: string, issues: readonly FlowIssue[]): string {
  return `${what} is not a valid flow (${issues.length} issue(s)); nothing was started:\n${issues.map((i) => `  ${i.path || '(flow)'}: ${i.message}`).join('\n')}`;
}

/** The input does not match the inputSchema of the flow `what` names. */
export function inputMismatchMessage(what: string, issues: readonly FlowIssue[]): string {
  return `the input does not match the inputSchema of ${what} (${issues.length} issue(s)); nothing was started:\n${issues.map((i) => `  ${i.path || '(flow)'}: ${i.message}`).join('\n')}`;
}

export function keyTakenMessage(key: string): string {
  return `could not start the workflow: key ${JSON.stringify(key)} is taken but its workflow was not found`;
}

export function idMessage(text: string, what: string): string {
  return `${what} must be a positive whole number (got ${JSON.stringify(text)})`;
}

/** A positive bigint id as text, or an `invalid_input` error naming the argument. */
export function parseIdOrFail(text: string | number, what: string): string {
  const trimmed = String(text).trim();
  if (!/^[1-9]\d{0,18}$/.test(trimmed)) throw new OperationError('invalid_input', idMessage(String(text), what));
  return trimmed;
}
