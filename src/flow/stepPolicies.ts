/**
 * A step's policies as the compiler reads them — checked durations, the retry policy, the
 * attempt timeout, a gate's approval and a timer's wait — each issue recorded with its path.
 * Pure, as the rest of the compiler (validate.ts).
 */
import { DEFAULT_RETRY, DEFAULT_STEP_TIMEOUT_MS, type CompiledStep, type RetryPolicy } from './compiled.js';
import { parseDuration } from './duration.js';
import type { SchemaCompiler } from './jsonSchema.js';
import type { FlowIssue, StepSpec } from './spec.js';

/** 100 years: longer is a mistake, and timestamps that far out are past what a JS Date can hold. */
const MAX_DURATION_MS = 100 * 365 * 86_400_000;

/** A duration in milliseconds, or undefined (absent, or not a duration: then an issue at `path`). */
export function durationMs(value: string | number | undefined, path: string, issues: FlowIssue[]): number | undefined {
  if (value === undefined) return undefined;
  try {
    const ms = parseDuration(value);
    if (ms > MAX_DURATION_MS) throw new Error(`invalid duration ${JSON.stringify(value)}: longer than 100 years`);
    return ms;
  } catch (err) {
    issues.push({ path, message: (err as Error).message });
    return undefined;
  }
}

/** The retry policy and the attempt timeout of step `s` (at `at`), over the defaults. */
export function compileRetryAndTimeout(s: StepSpec, at: string, issues: FlowIssue[]): { retry: RetryPolicy; timeoutMs: number } {
  const retry: RetryPolicy = { ...DEFAULT_RETRY };
  if (s.retry) {
    if (s.retry.maxAttempts !== undefined) retry.maxAttempts = s.retry.maxAttempts;
    if (s.retry.maxLost !== undefined) retry.maxLost = s.retry.maxLost;
    if (s.retry.multiplier !== undefined) retry.multiplier = s.retry.multiplier;
    if (s.retry.jitter !== undefined) retry.jitter = s.retry.jitter;
    retry.initialMs = durationMs(s.retry.initial, `${at}.retry.initial`, issues) ?? retry.initialMs;
    retry.maxMs = durationMs(s.retry.max, `${at}.retry.max`, issues) ?? retry.maxMs;
  }
  const timeoutMs = durationMs(s.timeout, `${at}.timeout`, issues) ?? DEFAULT_STEP_TIMEOUT_MS;
  if (timeoutMs <= 0) issues.push({ path: `${at}.timeout`, message: 'timeout must be greater than zero' });
  return { retry, timeoutMs };
}

/** A gate's approval: its timeout and what happens then, message, approvers, and the data's schema. */
export function compileApproval(s: StepSpec, at: string, schemas: SchemaCompiler, issues: FlowIssue[]): NonNullable<CompiledStep['approval']> {
  const a = s.approval === true || s.approval === undefined ? {} : s.approval;
  const approval: NonNullable<CompiledStep['approval']> = { onTimeout: a.onTimeout ?? 'fail' };
  const t = durationMs(a.timeout, `${at}.approval.timeout`, issues);
  if (t !== undefined) approval.timeoutMs = t;
  if (a.message !== undefined) approval.message = a.message;
  if (a.approvers !== undefined) approval.approvers = a.approvers;
  if (a.schema !== undefined) {
    const c = schemas.compile(a.schema);
    if (c.ok) approval.schema = c.check;
    else issues.push({ path: `${at}.approval.schema`, message: c.message });
  }
  return approval;
}

/** A timer's wait: until a time, a templated duration read when the timer starts, or a fixed one. */
export function compileWait(s: StepSpec, at: string, issues: FlowIssue[]): CompiledStep['wait'] {
  if (s.wait === undefined) return undefined;
  if (typeof s.wait === 'object') return { until: s.wait.until };
  return typeof s.wait === 'string' && s.wait.includes('{{') ? { duration: s.wait } : { ms: durationMs(s.wait, `${at}.wait`, issues) ?? 0 };
}
