/**
 * Errors as data. Every failure that reaches a step row or a workflow row is a
 * StepError (or converted to one by coerceError): it carries a stable `code`,
 * whether another attempt could succeed (`retryable`), and JSON `details`.
 */

export interface ErrorData {
  code: string;
  message: string;
  retryable?: boolean;
  step?: string;
  details?: unknown;
  [key: string]: unknown;
}

export class StepError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  readonly details: unknown;

  constructor(code: string, message: string, options: { retryable?: boolean; details?: unknown; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StepError';
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.details = options.details;
  }

  toJSON(): ErrorData {
    const data: ErrorData = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.details !== undefined) data.details = this.details;
    return data;
  }
}

/** A template could not be resolved (missing path, unknown root). Never retryable. */
export class TemplateError extends StepError {
  constructor(message: string, details?: unknown) {
    super('template_error', message, { retryable: false, details });
    this.name = 'TemplateError';
  }
}

/** A condition failed to compile or evaluate. Never retryable. */
export class ConditionError extends StepError {
  constructor(message: string, details?: unknown) {
    super('condition_error', message, { retryable: false, details });
    this.name = 'ConditionError';
  }
}

/** The step's tool call exceeded its timeout. Retryable. */
export class StepTimeoutError extends StepError {
  constructor(timeoutMs: number) {
    super('timeout', `step timed out after ${timeoutMs} ms`, { retryable: true, details: { timeoutMs } });
    this.name = 'StepTimeoutError';
  }
}

/** A configuration file or flag is invalid. `issues` point at the offending keys. */
export class ConfigError extends Error {
  readonly code = 'invalid_config';
  readonly issues: { path: string; message: string }[];

  constructor(message: string, issues: { path: string; message: string }[] = []) {
    super(issues.length ? `${message}\n${issues.map((i) => `  ${i.path || '(root)'}: ${i.message}`).join('\n')}` : message);
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

/** Converts anything thrown into a StepError, once, at the boundary. */
export function coerceError(err: unknown): StepError {
  if (err instanceof StepError) return err;
  if (err instanceof Error) {
    if (err.name === 'AbortError') return new StepError('aborted', err.message, { retryable: true, cause: err });
    return new StepError('tool_error', err.message, { retryable: true, cause: err });
  }
  return new StepError('tool_error', String(err), { retryable: true });
}

/** PostgreSQL error codes for which a whole transaction may simply be tried again. */
const RETRYABLE_PG_CODES = new Set(['40001', '40P01', '57P01', '57P02', '57P03', '08000', '08003', '08006', '53300']);

/**
 * A lock was not granted within the transaction's `lock_timeout` (55P03): another transaction
 * holds the row, for longer than this one was willing to wait.
 */
export function isLockNotAvailable(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '55P03';
}

export function isRetryablePgError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && RETRYABLE_PG_CODES.has(code)) return true;
  const message = err instanceof Error ? err.message : '';
  return /Connection terminated|ECONNREFUSED|ECONNRESET|connection timeout/i.test(message);
}

/** Deadlock (40P01) or serialization failure (40001): a conflict with another transaction, settled by trying again. */
export function isTransactionConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/**
 * Runs `fn`, naming the statement (a query function's name, like `claimReadySteps`) on any error
 * it throws, as `err.statement`, unless an inner call named it already: logs say which statement
 * met a deadlock, not only that one happened.
 */
export async function namingStatement<T>(statement: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (typeof err === 'object' && err !== null && !('statement' in err)) Object.assign(err, { statement });
    throw err;
  }
}

/** The statement `namingStatement` named on `err`, if any. */
export function statementOf(err: unknown): string | undefined {
  const s = (err as { statement?: unknown } | null)?.statement;
  return typeof s === 'string' ? s : undefined;
}
