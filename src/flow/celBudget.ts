/**
 * The cost budget of a CEL condition. `@marcbachmann/cel-js` limits what it parses (AST nodes,
 * nesting, list and map literal sizes) but not what an evaluation costs: eight nested
 * comprehensions over ten elements each run 10^8 iterations and hold the event loop for
 * seconds. Two defences, both cheap on the normal path:
 *
 * - at compile time (validation and admission), a condition whose comprehensions nest deeper
 *   than {@link MAX_COMPREHENSION_NESTING}, or whose nested comprehensions over literal lists
 *   would obviously cost more than the budget, is refused with a ConditionError;
 * - at evaluation, the checked AST is instrumented once: every comprehension charges the size of
 *   the collection it is about to walk, and every `+`, function or method call charges the
 *   length of the string or list it produced (so `cel.bind` doubling cannot build a gigabyte).
 *   Past {@link CONDITION_BUDGET} units the evaluation stops with a BudgetError, within a few
 *   milliseconds.
 *
 * `string.matches(pattern)` runs on RE2 (the `re2js` package: linear time, the syntax CEL
 * specifies) instead of JavaScript's backtracking RegExp, so `"aaaa…!".matches("^(a+)+$")` cannot
 * hold the event loop; a pattern RE2 does not accept (backreferences, lookaround) is a
 * ConditionError.
 *
 * The counting happens in wrappers around the `handle` functions the library's type checker
 * attaches to AST nodes; nothing is charged per AST node visited, so a condition without
 * comprehensions pays one closure call per `+` or call and nothing else.
 */
import { RE2JS } from 're2js';
import { ConditionError } from '../errors.js';
import { BudgetError } from './caps.js';

/** Cost units one evaluation may spend: one per comprehension element, one per list element or 16 string characters built. */
export const CONDITION_BUDGET = 100_000;
/** The deepest comprehensions (`all`, `exists`, `map`, `filter`, …) may nest in one condition. */
export const MAX_COMPREHENSION_NESTING = 3;
/** Parser limits applied to every condition (the library's defaults are 100,000 nodes, depth 250). */
export const CEL_PARSE_LIMITS = Object.freeze({ maxAstNodes: 5_000, maxDepth: 100, maxListElements: 1_000, maxMapEntries: 1_000, maxCallArguments: 32 });

/** The remaining units of one evaluation; reset before each. */
export interface Meter {
  remaining: number;
  readonly source: string;
  /**
   * The error thrown once the budget is spent, made once: comprehensions swallow their elements'
   * errors and go on, so every later element throws again, and a new Error (a stack captured)
   * each time would cost more than the work the budget saved.
   */
  spent?: BudgetError;
}

export function newMeter(source: string): Meter {
  return { remaining: CONDITION_BUDGET, source };
}

/** A node of the library's AST as far as this module reads it. */
interface Node {
  op: string;
  args: unknown;
  meta?: { alternate?: Node };
  handle?: (a: unknown, b: unknown, c: unknown, d: unknown) => unknown;
}

function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && typeof (value as { op?: unknown }).op === 'string';
}

/** The node a macro call stands for (`list.all(x, p)` is a comprehension node behind an `rcall`). */
function target(node: Node): Node {
  const alt = node.meta?.alternate;
  return alt && isNode(alt) ? alt : node;
}

function childrenOf(node: Node): unknown[] {
  const n = target(node);
  if (n.op === 'comprehension') {
    const a = n.args as { iterable?: unknown; init?: unknown; step?: unknown };
    return [a.iterable, a.init, a.step];
  }
  return Array.isArray(n.args) ? n.args : [n.args];
}

function forEachNode(value: unknown, visit: (node: Node) => void): void {
  const stack: unknown[] = [value];
  const seen = new Set<unknown>();
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
      continue;
    }
    if (!isNode(v) || seen.has(v)) continue;
    seen.add(v);
    visit(v);
    for (const child of childrenOf(v)) stack.push(child);
  }
}

function charge(meter: Meter, units: number): void {
  meter.remaining -= units;
  if (meter.remaining < 0) {
    throw (meter.spent ??= new BudgetError(
      `condition "${meter.source}" exceeded its evaluation budget of ${CONDITION_BUDGET} units (comprehension elements, compared, searched and built values)`,
      { budget: 'condition', limit: CONDITION_BUDGET },
    ));
  }
}

function sizeOf(value: unknown): number {
  if (Array.isArray(value)) return value.length;
  if (value instanceof Map || value instanceof Set) return value.size;
  if (typeof value === 'object' && value !== null) {
    let n = 0;
    for (const _ in value) n++;
    return n;
  }
  return 0;
}

function builtSize(value: unknown): number {
  if (typeof value === 'string') return value.length >> 4;
  if (Array.isArray(value)) return value.length;
  return 0;
}

/**
 * Units for walking `value` as equality and membership do: one per list element and map entry at
 * every depth, one per 16 string characters. Stops counting past `limit`, so measuring never costs
 * more than what it is about to charge.
 */
export function deepCost(value: unknown, limit: number): number {
  let units = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && units <= limit) {
    const v = stack.pop();
    if (typeof v === 'string') units += v.length >> 4;
    else if (typeof v !== 'object' || v === null) continue;
    else if (Array.isArray(v) || v instanceof Set || v instanceof Map) {
      units += Array.isArray(v) ? v.length : v.size;
      if (units > limit) break;
      for (const x of v instanceof Map ? v.values() : v) {
        if (typeof x === 'object' || typeof x === 'string') stack.push(x);
      }
    } else {
      for (const key in v) {
        units++;
        const x = (v as Record<string, unknown>)[key];
        if (typeof x === 'object' || typeof x === 'string') stack.push(x);
        if (units > limit) break;
      }
    }
  }
  return units;
}

/**
 * What the walk of `value` may cost at most before the budget is spent (+1 to overspend it).
 * Throws at once when it is spent already: even a walk stopped at its first key would cost the
 * whole object (`for … in` lists every key first), once per element of the comprehension that
 * swallowed the first error.
 */
function within(meter: Meter): number {
  if (meter.remaining < 0) charge(meter, 0);
  return meter.remaining + 1;
}

/**
 * `a == b`, `a < b`, …: walking both to the end of the smaller one. Comparing two scalars (or
 * short strings) is free, like any constant-time step: the comprehension around it pays per element.
 */
function comparisonCost(a: unknown, b: unknown, meter: Meter): number {
  if (typeof a !== 'object' && typeof a !== 'string') return 0;
  const limit = within(meter);
  return Math.min(deepCost(a, limit), deepCost(b, limit));
}

/** `x in list` compares x with every element (a map is one hash lookup). */
function membershipCost(collection: unknown, meter: Meter): number {
  if (Array.isArray(collection) || collection instanceof Set) return deepCost(collection, within(meter));
  return 0;
}

/** Functions that take constant time whatever the size of a list or map they are given. */
const CONSTANT_TIME_FUNCTIONS: ReadonlySet<string> = new Set(['size', 'dyn', 'type', 'has']);

/**
 * A call's arguments (the receiver first for a method): strings cost their length (most string
 * functions walk them: contains, startsWith, size counting code points), lists and maps their
 * size unless the function is constant-time (`size(list)`).
 */
function argumentsCost(name: unknown, args: unknown): number {
  if (!Array.isArray(args)) return 0;
  const walksCollections = typeof name !== 'string' || !CONSTANT_TIME_FUNCTIONS.has(name);
  let units = 0;
  for (const arg of args) {
    if (typeof arg === 'string') units += arg.length >> 4;
    else if (walksCollections && typeof arg === 'object' && arg !== null) units += sizeOf(arg);
  }
  return units;
}

const COMPARISONS: ReadonlySet<string> = new Set(['==', '!=', '<', '<=', '>', '>=']);

/** The function a call node names (`contains` in `s.contains(t)`). */
function callName(n: Node): unknown {
  return Array.isArray(n.args) ? (n.args as unknown[])[0] : undefined;
}

/**
 * Wraps the handlers of a type-checked AST so that evaluating it spends `meter`. Call once per
 * compiled condition, after `check()` and before the first evaluation.
 */
export function instrument(ast: unknown, meter: Meter): void {
  const patterns = new Map<string, RE2JS>();
  forEachNode(ast, (node) => {
    const n = target(node);
    const handle = n.handle;
    if (typeof handle !== 'function') return;
    if (isMatchesCall(n)) {
      n.handle = (a, b, c, d) => {
        const [text, pattern] = Array.isArray(a) ? (a as unknown[]) : [];
        if (typeof text !== 'string' || typeof pattern !== 'string') return handle(a, b, c, d);
        charge(meter, builtSize(text));
        return re2(patterns, pattern).test(text);
      };
    } else if (n.op === 'comprehension') {
      n.handle = (items, args, ev, ctx) => {
        charge(meter, 0);
        charge(meter, 1 + sizeOf(items));
        return handle(items, args, ev, ctx);
      };
    } else if (n.op === 'in') {
      n.handle = (a, b, c, d) => {
        charge(meter, membershipCost(b, meter));
        return handle(a, b, c, d);
      };
    } else if (COMPARISONS.has(n.op)) {
      n.handle = (a, b, c, d) => {
        charge(meter, comparisonCost(a, b, meter));
        return handle(a, b, c, d);
      };
    } else if (n.op === 'call' || n.op === 'rcall') {
      const name = callName(n);
      n.handle = (a, b, c, d) => {
        charge(meter, 0);
        charge(meter, argumentsCost(name, a));
        const out = handle(a, b, c, d);
        charge(meter, builtSize(out));
        return out;
      };
    } else if (n.op === '+') {
      // Charged before it copies: a comprehension swallows errors and would build it again.
      n.handle = (a, b, c, d) => {
        charge(meter, builtSize(a) + builtSize(b));
        return handle(a, b, c, d);
      };
    }
  });
}

/** `text.matches(pattern)`: a method call named matches with one argument. */
function isMatchesCall(n: Node): boolean {
  if (n.op !== 'rcall' || !Array.isArray(n.args)) return false;
  const [name, , args] = n.args as unknown[];
  return name === 'matches' && Array.isArray(args) && args.length === 1;
}

/** A compiled RE2 pattern, cached per condition (patterns are nearly always literals). */
function re2(cache: Map<string, RE2JS>, pattern: string): RE2JS {
  let compiled = cache.get(pattern);
  if (!compiled) {
    try {
      compiled = RE2JS.compile(pattern);
    } catch (err) {
      throw new ConditionError(`invalid regular expression ${JSON.stringify(pattern.slice(0, 200))} (RE2 syntax: no backreferences or lookaround): ${(err as Error).message}`);
    }
    if (cache.size < 64) cache.set(pattern, compiled);
  }
  return compiled;
}

/** Literal list sizes, or undefined when the collection is only known at run time. */
function literalSize(node: unknown): number | undefined {
  if (!isNode(node)) return undefined;
  const n = target(node);
  if (n.op === 'list' && Array.isArray(n.args)) return n.args.length;
  return undefined;
}

/**
 * What can be told before running: how deep comprehensions nest, and what nested comprehensions
 * over literal lists cost at least. Returns a problem to report, or undefined.
 */
export function staticBudgetProblem(ast: unknown): string | undefined {
  let deepest = 0;
  let costliest = 0;
  const walk = (value: unknown, depth: number, cost: number): void => {
    if (Array.isArray(value)) {
      for (const v of value) walk(v, depth, cost);
      return;
    }
    if (!isNode(value)) return;
    const n = target(value);
    if (n.op === 'comprehension') {
      const a = n.args as { iterable?: unknown; init?: unknown; step?: unknown };
      const size = literalSize(a.iterable);
      const inner = cost * (size ?? 1);
      deepest = Math.max(deepest, depth + 1);
      costliest = Math.max(costliest, inner);
      walk(a.iterable, depth, cost);
      walk(a.init, depth, cost);
      walk(a.step, depth + 1, inner);
      return;
    }
    for (const child of childrenOf(n)) walk(child, depth, cost);
  };
  walk(ast, 0, 1);
  if (deepest > MAX_COMPREHENSION_NESTING) {
    return `comprehensions (all, exists, map, filter, …) nest ${deepest} deep, over the evaluation budget's limit of ${MAX_COMPREHENSION_NESTING} levels`;
  }
  if (costliest > CONDITION_BUDGET) {
    return `nested comprehensions over literal lists take ${costliest} iterations, over the evaluation budget of ${CONDITION_BUDGET}`;
  }
  return undefined;
}
