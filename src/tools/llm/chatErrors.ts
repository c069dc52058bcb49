/**
 * What the `openai` client throws → a StepError saying whether another attempt could succeed.
 * The client's own retries are off (stepd's step retry decides, with `ready_at` after
 * Retry-After): 429 is `rate_limited` (retryable, `retryAfterMs` from `retry-after-ms` or
 * `Retry-After`), 408, 409 and 5xx `model_unavailable` (retryable), a connection timeout
 * `timeout` and a connection failure `model_unreachable` (both retryable), any other status
 * `model_error` (not retryable: a bad key or request will fail again). Remote text is redacted and cut.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { StepError } from '../../errors.js';
import { cutRemoteText, type Secrets } from '../../secrets.js';
import { parseRetryAfter } from '../httpTool.js';

export function chatError(err: unknown, what: string, signal: AbortSignal, secrets: Secrets | undefined, now: number): StepError {
  const own = stepErrorIn(err);
  if (own) return own;
  if (signal.aborted) return signal.reason instanceof StepError ? signal.reason : new StepError('aborted', 'the step was aborted', { retryable: true });
  if (err instanceof APIConnectionTimeoutError) return new StepError('timeout', `${what} timed out`, { retryable: true });
  if (err instanceof APIUserAbortError) return new StepError('aborted', `${what} was aborted`, { retryable: true });
  if (err instanceof APIConnectionError) {
    return new StepError('model_unreachable', `${what} failed: ${cutRemoteText(causeText(err), secrets)}`, { retryable: true });
  }
  if (err instanceof APIError && typeof err.status === 'number') {
    const status = err.status;
    const message = cutRemoteText(err.message, secrets);
    const details: { status: number; retryAfterMs?: number } = { status };
    if (status === 429) {
      const retryAfterMs = retryAfter(err.headers, now);
      if (retryAfterMs !== undefined) details.retryAfterMs = retryAfterMs;
      return withRetryAfter(new StepError('rate_limited', `${what} answered 429 (rate limited): ${message}`, { retryable: true, details }), retryAfterMs);
    }
    if (status === 408 || status === 409 || status >= 500) {
      const retryAfterMs = retryAfter(err.headers, now);
      return withRetryAfter(new StepError('model_unavailable', `${what} answered ${status}: ${message}`, { retryable: true, details }), retryAfterMs);
    }
    return new StepError('model_error', `${what} answered ${status}: ${message}`, { retryable: false, details });
  }
  const text = err instanceof Error ? err.message : String(err);
  return new StepError('model_error', `${what} failed: ${cutRemoteText(text, secrets)}`, { retryable: true });
}

/** A StepError thrown by our own fetch (egress_denied, response_too_large), wrapped by the client. */
function stepErrorIn(err: unknown): StepError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof StepError) return e;
  }
  return undefined;
}

function causeText(err: Error): string {
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

function retryAfter(headers: Headers | undefined, now: number): number | undefined {
  const ms = Number(headers?.get('retry-after-ms') ?? Number.NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  return parseRetryAfter(headers?.get('retry-after') ?? null, now);
}

function withRetryAfter(e: StepError, retryAfterMs: number | undefined): StepError {
  return retryAfterMs === undefined ? e : Object.assign(e, { retryAfterMs });
}
