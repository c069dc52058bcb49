/**
 * Validation and compilation of a fork step's options (DESIGN §2d): conditional `parallel`
 * entries, the completion policy (`complete`, `cancelRemaining`) and `concurrency` on `parallel`.
 * Pure; validate.ts calls it once per step and merges what it returns.
 */
import { compileCondition, type CompiledCondition, type ConditionEnvironments } from './conditions.js';
import type { ForkPolicy } from './compiled.js';
import type { FlowIssue, StepSpec } from './spec.js';

/** Variables a `complete.when` condition sees besides the usual ones. */
export const WHEN_ROOTS: readonly string[] = Object.freeze(['results', 'completed']);

export interface ForkOptions {
  /** Branch names in listed order (parallel). */
  branches?: string[];
  conditions?: (CompiledCondition | undefined)[];
  policy?: ForkPolicy;
  concurrency?: number;
  /** Steps the entry conditions and `when` read (`steps.NAME`). */
  stepRefs: string[];
  usesItem: boolean;
}

export interface ForkContext {
  names: ReadonlySet<string>;
  aliases: readonly string[];
  conditions: ConditionEnvironments;
  itemWords: RegExp;
}

const KEYED_CONCURRENCY_HINT = '{"key", "limit"} is keyed concurrency, for a tool step or a whole flow';

export function compileForkOptions(name: string, s: StepSpec, isFork: boolean, hasTool: boolean, ctx: ForkContext, issues: FlowIssue[]): ForkOptions {
  const at = `steps.${name}`;
  const out: ForkOptions = { stepRefs: [], usesItem: false };
  const refs = new Set<string>();
  const noteCondition = (source: string, path: string, extra: readonly string[]): CompiledCondition | undefined => {
    try {
      const c = compileCondition(source, extra, ctx.conditions);
      for (const ref of conditionStepRefs(source)) {
        if (!ctx.names.has(ref)) issues.push({ path, message: `condition refers to step "${ref}", which does not exist` });
        else refs.add(ref);
      }
      if (ctx.itemWords.test(source)) out.usesItem = true;
      return c;
    } catch (err) {
      issues.push({ path, message: (err as Error).message });
      return undefined;
    }
  };

  if (!isFork) {
    if (s.complete !== undefined) issues.push({ path: `${at}.complete`, message: '"complete" only applies to a step with "parallel" or "forEach"' });
    if (s.cancelRemaining !== undefined) issues.push({ path: `${at}.cancelRemaining`, message: '"cancelRemaining" only applies to a step with "parallel" or "forEach"' });
    // A number as concurrency on a step that does not fork: flow/capacity.ts names the mix-up.
    return out;
  }

  if (s.parallel !== undefined) {
    const entries = s.parallel;
    if (entries.length === 0) issues.push({ path: `${at}.parallel`, message: 'parallel needs at least one branch' });
    const branches = entries.map((e) => (typeof e === 'string' ? e : e.then));
    branches.forEach((b, i) => {
      const path = `${at}.parallel[${i}]${typeof entries[i] === 'string' ? '' : '.then'}`;
      if (!ctx.names.has(b)) issues.push({ path, message: `step ${JSON.stringify(b.length > 80 ? `${b.slice(0, 80)}…` : b)} does not exist` });
    });
    if (new Set(branches).size !== branches.length) issues.push({ path: `${at}.parallel`, message: 'a step is listed twice in parallel' });
    // A fan-out that starts itself would nest new instances of itself without end.
    if (branches.includes(name)) issues.push({ path: `${at}.parallel`, message: `a fan-out cannot list itself ("${name}") as a branch` });
    out.branches = branches;
    if (entries.some((e) => typeof e !== 'string')) {
      out.conditions = entries.map((e, i) => (typeof e === 'string' ? undefined : noteCondition(e.if, `${at}.parallel[${i}].if`, ctx.aliases)));
    }
    if (s.concurrency !== undefined) {
      const c = s.concurrency;
      if (typeof c === 'object' && c !== null) {
        issues.push({ path: `${at}.concurrency`, message: `on a fork step "concurrency" is a number, the branches live at once (1: one at a time); ${KEYED_CONCURRENCY_HINT}` });
      } else if (typeof c !== 'number' || !Number.isInteger(c) || c < 1 || c > 10_000) {
        issues.push({ path: `${at}.concurrency`, message: `concurrency must be a whole number from 1 to 10000 (got ${JSON.stringify(c)})` });
      } else if (hasTool && out.conditions !== undefined) {
        issues.push({
          path: `${at}.concurrency`,
          message: 'a tool step cannot both start branches conditionally and pace them; put the "parallel" in a step of its own after the tool step',
        });
      } else out.concurrency = c;
    }
  } else if (s.concurrency !== undefined) {
    issues.push({
      path: `${at}.concurrency`,
      message: typeof s.concurrency === 'object' && s.concurrency !== null
        ? `a forEach is paced by "forEach": { "concurrency": N }; ${KEYED_CONCURRENCY_HINT}`
        : 'a forEach is paced by "forEach": { "concurrency": N }, not by "concurrency" on the step',
    });
  }

  const complete = s.complete;
  let policy: ForkPolicy['complete'] = { kind: 'all' };
  if (complete === 'first') policy = { kind: 'atLeast', n: 1 };
  else if (complete !== undefined && complete !== 'all') {
    if ('atLeast' in complete) {
      policy = { kind: 'atLeast', n: complete.atLeast };
      const listed = out.branches?.length;
      if (listed !== undefined && complete.atLeast > listed) {
        issues.push({ path: `${at}.complete.atLeast`, message: `complete.atLeast is ${complete.atLeast}, but the fork has only ${listed} branches` });
      }
    } else {
      const condition = noteCondition(complete.when, `${at}.complete.when`, [...WHEN_ROOTS, ...ctx.aliases]);
      if (condition) policy = { kind: 'when', condition };
    }
  }
  if (complete === undefined && s.cancelRemaining !== undefined) {
    issues.push({ path: `${at}.cancelRemaining`, message: '"cancelRemaining" goes with "complete" ("first", {"atLeast": N} or {"when": …}); with every branch awaited nothing remains' });
  }
  out.policy = { complete: policy, cancelRemaining: s.cancelRemaining ?? policy.kind !== 'all' };
  out.stepRefs = [...refs];
  return out;
}

/** Every condition a step holds (branch cases, conditional parallel entries, complete.when), for the flow's condition budget. */
export function conditionSources(s: StepSpec): string[] {
  const out = (s.branch ?? []).map((b) => b.if);
  for (const e of s.parallel ?? []) if (typeof e !== 'string') out.push(e.if);
  if (typeof s.complete === 'object' && 'when' in s.complete) out.push(s.complete.when);
  return out;
}

/** `steps.NAME` and `steps["NAME"]` mentioned in a condition. */
export function conditionStepRefs(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/\bsteps\s*(?:\.\s*([A-Za-z_][\w-]*)|\[\s*["']([^"']+)["']\s*\])/g)) {
    const name = m[1] ?? m[2];
    if (name) out.push(name);
  }
  return out;
}
