import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY, type CompiledFlow, type RetryPolicy } from '../../src/flow/compiled.js';
import { backoffMs, failureNeedsLostCount, resolveFailure, resolveSuccess } from '../../src/flow/transitions.js';
import { compileFlow } from '../../src/flow/validate.js';

function compile(raw: unknown): CompiledFlow {
  const result = compileFlow(raw);
  if (!result.ok) throw new Error(`invalid test flow: ${JSON.stringify(result.issues)}`);
  return result.flow;
}

const noop = (more: Record<string, unknown> = {}) => ({ tool: 'core.noop', ...more });
const scope = (extra: Record<string, unknown> = {}) => ({ input: { xs: [1, 2] }, steps: {}, workflow: { id: '1', name: 't' }, ...extra });

describe('resolveSuccess: what follows a successful step', () => {
  const f = compile({
    start: 'a',
    steps: {
      a: noop({ next: 'b' }),
      b: noop({
        branch: [
          { if: 'result.n > 10', then: 'big' },
          { if: 'result.n > 0', then: 'small' },
        ],
        default: 'zero',
      }),
      big: noop({ branch: [{ if: 'result.ok == true', then: 'fan' }] }),
      small: noop({ next: 'each' }),
      zero: noop({ done: true, output: { n: '{{steps.b.result.n}}', mine: '{{result}}' } }),
      fan: { parallel: ['p1', 'p2'], join: 'joined' },
      p1: noop(),
      p2: noop({ output: '{{result.v}}' }),
      joined: noop({ done: { status: 'failed', error: 'stop here' } }),
      each: { forEach: { items: '{{input.xs}}', step: 'item' }, join: 'end' },
      item: noop({ args: { x: '{{item}}' } }),
      end: noop({ done: true }),
    },
  });

  it('goes to the next step', () => {
    expect(resolveSuccess(f, 'a', scope({ result: null }))).toEqual({ kind: 'goto', to: 'b' });
  });

  it('takes the first branch whose condition matches', () => {
    expect(resolveSuccess(f, 'b', scope({ result: { n: 50 } }))).toEqual({ kind: 'goto', to: 'big' });
    expect(resolveSuccess(f, 'b', scope({ result: { n: 5 } }))).toEqual({ kind: 'goto', to: 'small' });
  });

  it('takes default when no branch matches', () => {
    expect(resolveSuccess(f, 'b', scope({ result: { n: 0 } }))).toEqual({ kind: 'goto', to: 'zero' });
  });

  it('fails the branch (the workflow, at the top level) with no_branch_matched when nothing matches and there is no default', () => {
    expect(resolveSuccess(f, 'big', scope({ result: { ok: false } }))).toEqual({
      kind: 'failBranch', transition: true,
      error: { code: 'no_branch_matched', message: expect.stringContaining('"big"'), step: 'big', details: { result: { ok: false } } },
    });
  });

  it('fails the workflow when a condition cannot be evaluated against the result', () => {
    const d = resolveSuccess(f, 'b', scope({ result: 'not an object' }));
    expect(d).toMatchObject({ kind: 'failBranch', transition: true, error: { code: 'condition_error', step: 'b' } });
  });

  it('fans out to every parallel branch', () => {
    expect(resolveSuccess(f, 'fan', scope({ result: null }))).toEqual({ kind: 'parallel', branches: ['p1', 'p2'] });
  });

  it('fans out over forEach items resolved from the scope', () => {
    expect(resolveSuccess(f, 'each', scope({ result: null }))).toEqual({ kind: 'forEach', items: [1, 2], step: 'item', concurrency: 10_000 });
  });

  it('fails the workflow with invalid_items when forEach items are not an array', () => {
    const d = resolveSuccess(f, 'each', scope({ input: { xs: 'nope' }, result: null }));
    expect(d).toMatchObject({ kind: 'failBranch', transition: true, error: { code: 'invalid_items', step: 'each', details: { items: 'nope' } } });
  });

  it('fails the workflow with template_error when forEach items name a missing path', () => {
    const d = resolveSuccess(f, 'each', scope({ input: {}, result: null }));
    expect(d).toMatchObject({ kind: 'failBranch', transition: true, error: { code: 'template_error', step: 'each' } });
  });

  it('completes the workflow with the resolved output template', () => {
    const d = resolveSuccess(f, 'zero', scope({ result: 'own', steps: { b: { result: { n: 0 } } } }));
    expect(d).toEqual({ kind: 'complete', output: { n: 0, mine: 'own' } });
  });

  it('completes with the step result when there is no output template', () => {
    expect(resolveSuccess(f, 'end', scope({ result: { r: 1 } }))).toEqual({ kind: 'complete', output: { r: 1 } });
  });

  it('fails the workflow when done says failed, with the flow\'s message', () => {
    expect(resolveSuccess(f, 'joined', scope({ result: null }))).toEqual({
      kind: 'failWorkflow',
      error: { code: 'failed_by_flow', message: 'stop here', step: 'joined' },
    });
  });

  it('arrives at the join at the end of a branch, with the output or the result', () => {
    expect(resolveSuccess(f, 'p1', scope({ result: 7 }))).toEqual({ kind: 'arrive', output: 7 });
    expect(resolveSuccess(f, 'p2', scope({ result: { v: 'x' } }))).toEqual({ kind: 'arrive', output: 'x' });
  });

  it('fails the workflow with template_error when an output template names a missing value', () => {
    const d = resolveSuccess(f, 'zero', scope({ result: 'own', steps: {} }));
    expect(d).toMatchObject({ kind: 'failBranch', transition: true, error: { code: 'template_error', step: 'zero' } });
  });

  it('resolves a seed-form join marker as arriving', () => {
    const seed = compile({
      start: { name: 'fan', parallel: ['a', 'b'] },
      a: noop({ join: 'merge' }),
      b: noop({ join: 'merge' }),
      merge: noop({ done: true }),
    });
    expect(resolveSuccess(seed, 'a', scope({ result: 1 }))).toEqual({ kind: 'arrive', output: 1 });
  });
});

describe("the seed's conditions keep their meaning through branches", () => {
  const seedFlow = compile({
    start: {
      name: 'check',
      tool: 'core.echo',
      branch: [
        { if: 'result == true', then: 'yes' },
        { if: 'result == false', then: 'no' },
        { if: 'result == nil', then: 'nothing' },
        { if: 'result == approved', then: 'approved' },
        { if: 'result != rejected', then: 'other' },
      ],
      default: 'rejected',
    },
    yes: noop(),
    no: noop(),
    nothing: noop(),
    approved: noop(),
    other: noop(),
    rejected: noop(),
  });
  it.each([
    [true, 'yes'],
    ['true', 'yes'],
    [false, 'no'],
    ['false', 'no'],
    [null, 'nothing'],
    ['', 'nothing'],
    ['nil', 'nothing'],
    ['approved', 'approved'],
    ['maybe', 'other'],
    [0, 'other'],
    ['rejected', 'rejected'],
  ])('result %j goes to %s', (result, to) => {
    expect(resolveSuccess(seedFlow, 'check', scope({ result }))).toEqual({ kind: 'goto', to });
  });

  it('routes on result != nil', () => {
    const f = compile({ start: { name: 'c', tool: 'core.echo', branch: [{ if: 'result != nil', then: 'some' }], default: 'none' }, some: noop(), none: noop() });
    expect(resolveSuccess(f, 'c', scope({ result: { a: 1 } }))).toEqual({ kind: 'goto', to: 'some' });
    expect(resolveSuccess(f, 'c', scope({ result: 'nil' }))).toEqual({ kind: 'goto', to: 'none' });
  });
});

describe('backoffMs', () => {
  const policy: RetryPolicy = { maxAttempts: 10, maxLost: 5, initialMs: 1_000, multiplier: 2, maxMs: 30_000, jitter: false };

  it('grows exponentially from initial by the multiplier', () => {
    expect([1, 2, 3, 4].map((a) => backoffMs(policy, a, 0.5))).toEqual([1_000, 2_000, 4_000, 8_000]);
  });

  it('is capped at max', () => {
    expect(backoffMs(policy, 6, 0.5)).toBe(30_000);
    expect(backoffMs(policy, 60, 0.5)).toBe(30_000);
  });

  it('with jitter stays within [base/2, base]', () => {
    const jittered = { ...policy, jitter: true };
    expect(backoffMs(jittered, 3, 0)).toBe(2_000);
    expect(backoffMs(jittered, 3, 0.999999)).toBe(4_000);
    for (let i = 0; i < 100; i++) {
      const ms = backoffMs(jittered, 3, i / 100);
      expect(ms).toBeGreaterThanOrEqual(2_000);
      expect(ms).toBeLessThanOrEqual(4_000);
    }
    expect(backoffMs(jittered, 20, 0)).toBe(15_000);
  });

  it('uses the documented defaults (2s, x2, 30s, jitter)', () => {
    expect(DEFAULT_RETRY).toEqual({ maxAttempts: 3, maxLost: 5, initialMs: 2_000, multiplier: 2, maxMs: 30_000, jitter: true });
    expect(backoffMs(DEFAULT_RETRY, 1, 0)).toBe(1_000);
    expect(backoffMs(DEFAULT_RETRY, 2, 0.999999)).toBe(4_000);
  });
});

describe('resolveFailure: what follows a failed attempt', () => {
  const f = compile({
    start: 'a',
    steps: {
      a: noop({ retry: { maxAttempts: 3, initial: '1s', jitter: false }, next: 'b' }),
      b: noop({ retry: { maxAttempts: 2, initial: '1s', jitter: false }, onError: 'handle' }),
      handle: noop({ args: { e: '{{error.message}}' }, next: 'once' }),
      once: noop({ retry: { maxAttempts: 1 } }),
    },
  });
  const retryable = { code: 'tool_error', message: 'boom', retryable: true };
  const fatal = { code: 'bad_args', message: 'no', retryable: false };

  it('retries a retryable error with exponential backoff while attempts remain', () => {
    expect(resolveFailure(f, 'a', 1, retryable, 0)).toEqual({ kind: 'retry', delayMs: 1_000 });
    expect(resolveFailure(f, 'a', 2, retryable, 0)).toEqual({ kind: 'retry', delayMs: 2_000 });
  });

  it('re-runs a step whose executor died at once, without spending its attempts: lost attempts have their own bound, retry.maxLost', () => {
    const lost = { code: 'lost', message: 'executor stopped heartbeating', retryable: true };
    expect(resolveFailure(f, 'a', 1, lost, 0)).toEqual({ kind: 'retry', delayMs: 0 });
    // The third attempt of a step with maxAttempts 3 was lost, as were the two before it: it runs again.
    expect(resolveFailure(f, 'a', 3, lost, 0, 2)).toEqual({ kind: 'retry', delayMs: 0 });
    // Two lost attempts, then a failure of the step's own: one of its three attempts is spent.
    expect(resolveFailure(f, 'a', 3, retryable, 0, 2)).toEqual({ kind: 'retry', delayMs: 4_000 });
    expect(resolveFailure(f, 'a', 5, retryable, 0, 2)).toMatchObject({ kind: 'failBranch' });
    // The fifth lost attempt (default maxLost 5) ends the step, naming the bound; not retryable.
    expect(resolveFailure(f, 'a', 5, lost, 0, 4)).toEqual({
      kind: 'failBranch',
      error: { code: 'lost', message: 'executor stopped heartbeating; lost 5 times (retry.maxLost is 5)', retryable: false, details: { lostAttempts: 5, maxLost: 5 }, step: 'a', attempt: 5 },
    });
  });

  it('routes a step that ran out of lost attempts to its onError', () => {
    const g = compile({ start: 'a', steps: { a: noop({ retry: { maxLost: 2 }, onError: 'h' }), h: noop({}) } });
    const lost = { code: 'lost', message: 'gone', retryable: true };
    expect(resolveFailure(g, 'a', 2, lost, 0, 0)).toEqual({ kind: 'retry', delayMs: 0 });
    expect(resolveFailure(g, 'a', 3, lost, 0, 1)).toMatchObject({ kind: 'goto', to: 'h', error: { code: 'lost', attempt: 3, details: { lostAttempts: 2, maxLost: 2 } } });
  });

  it('asks for the count of lost attempts only when it could change the answer', () => {
    const lost = { code: 'lost', message: 'gone', retryable: true };
    expect(failureNeedsLostCount(f, 'a', 1, lost)).toBe(false);
    expect(failureNeedsLostCount(f, 'a', 2, lost)).toBe(true);
    expect(failureNeedsLostCount(f, 'a', 2, retryable)).toBe(false);
    expect(failureNeedsLostCount(f, 'a', 3, retryable)).toBe(true);
    expect(failureNeedsLostCount(f, 'a', 3, fatal)).toBe(false);
  });

  it('fails the branch after the last attempt, naming step and attempt', () => {
    expect(resolveFailure(f, 'a', 3, retryable, 0)).toEqual({ kind: 'failBranch', error: { ...retryable, step: 'a', attempt: 3 } });
  });

  it('skips the remaining attempts for a non-retryable error', () => {
    expect(resolveFailure(f, 'a', 1, fatal, 0)).toEqual({ kind: 'failBranch', error: { ...fatal, step: 'a', attempt: 1 } });
  });

  it('treats an error without a retryable flag as not retryable', () => {
    expect(resolveFailure(f, 'a', 1, { code: 'x', message: 'y' }, 0)).toMatchObject({ kind: 'failBranch' });
  });

  it('honours a Retry-After longer than the backoff', () => {
    expect(resolveFailure(f, 'a', 1, { ...retryable, retryAfterMs: 7_500 }, 0)).toEqual({ kind: 'retry', delayMs: 7_500 });
  });

  it('keeps the backoff when Retry-After is shorter', () => {
    expect(resolveFailure(f, 'a', 2, { ...retryable, retryAfterMs: 10 }, 0)).toEqual({ kind: 'retry', delayMs: 2_000 });
  });

  it('routes to onError after the last attempt, carrying the error', () => {
    expect(resolveFailure(f, 'b', 1, retryable, 0)).toMatchObject({ kind: 'retry' });
    expect(resolveFailure(f, 'b', 2, retryable, 0)).toEqual({ kind: 'goto', to: 'handle', error: { ...retryable, step: 'b', attempt: 2 } });
  });

  it('routes a non-retryable error to onError at once', () => {
    expect(resolveFailure(f, 'b', 1, fatal, 0)).toEqual({ kind: 'goto', to: 'handle', error: { ...fatal, step: 'b', attempt: 1 } });
  });

  it('never retries a step allowed one attempt', () => {
    expect(resolveFailure(f, 'once', 1, retryable, 0)).toMatchObject({ kind: 'failBranch' });
  });

  it('uses three attempts by default', () => {
    const d = compile({ start: 's', steps: { s: noop() } });
    expect(resolveFailure(d, 's', 2, retryable, 0)).toMatchObject({ kind: 'retry' });
    expect(resolveFailure(d, 's', 3, retryable, 0)).toMatchObject({ kind: 'failBranch' });
  });
});
