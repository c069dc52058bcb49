/**
 * Whether a fork instance's join is due (DESIGN §2d): a pure function of its completion policy
 * and its branches' counts — and, for `when`, of the results so far. The executor asks after
 * every batch of arrivals at the fork; it creates the join on `join` once, and fails the fork
 * with `join_unreachable` when the policy can no longer hold.
 */
import { StepError, type ErrorData } from '../errors.js';
import type { ForkPolicy } from './compiled.js';

export interface ForkCounts {
  /** Branches (items) that will run in all: the held branches of a parallel, a forEach's items. */
  total: number;
  /** Branches whose chain ended with a result. */
  completed: number;
  /** Branches that ended any way (completed, failed under allSettled, cancelled). */
  finished: number;
}

export type JoinVerdict = { kind: 'wait' } | { kind: 'join' } | { kind: 'unreachable'; error: ErrorData };

export const ALL_BRANCHES: ForkPolicy = Object.freeze({ complete: Object.freeze({ kind: 'all' as const }), cancelRemaining: false });

/**
 * `when` is given the values the condition sees (results, completed, input, steps) only when
 * asked: `vars()` is called at most once, and only for a `when` policy.
 */
export function joinVerdict(policy: ForkPolicy, c: ForkCounts, vars: () => Record<string, unknown>, fork: string): JoinVerdict {
  const allDone = c.finished >= c.total;
  const p = policy.complete;
  if (p.kind === 'all') return allDone ? { kind: 'join' } : { kind: 'wait' };
  if (p.kind === 'atLeast') {
    if (c.completed >= p.n) return { kind: 'join' };
    const possible = c.completed + (c.total - c.finished);
    if (possible < p.n) {
      return unreachable(fork, `fan-out "${fork}" needs ${p.n} completed branches but at most ${possible} of ${c.total} can complete`, { needed: p.n, completed: c.completed, total: c.total, finished: c.finished });
    }
    return { kind: 'wait' };
  }
  if (p.condition.evaluate(vars())) return { kind: 'join' };
  if (allDone) {
    return unreachable(fork, `every branch of fan-out "${fork}" finished and complete.when (${p.condition.source}) never held`, { completed: c.completed, total: c.total, finished: c.finished });
  }
  return { kind: 'wait' };
}

function unreachable(fork: string, message: string, details: Record<string, unknown>): JoinVerdict {
  return { kind: 'unreachable', error: { code: 'join_unreachable', message, retryable: false, step: fork, details } };
}

/**
 * The verdict, or — when complete.when cannot be evaluated (a missing key, its budget) — a
 * failure of the fork with that error, as a failed branch would fail it.
 */
export function safeVerdict(verdict: () => JoinVerdict, fork: string): JoinVerdict {
  try {
    return verdict();
  } catch (err) {
    if (!(err instanceof StepError)) throw err;
    return { kind: 'unreachable', error: { ...err.toJSON(), step: fork } };
  }
}
