/**
 * `{{ … }}` templates in flow JSON: resolution against the values the executor provides, and a
 * static scan for the validator. Pure: no I/O, no module state.
 *
 * Grammar of the text between the braces (surrounding whitespace allowed):
 *
 *   expression := root segment*
 *   root       := identifier                      input, steps, result, item, index, …
 *   segment    := "." name                        .hits  .0  .by-web
 *               | "[" integer "]"                 [3]
 *               | "[" quoted "]"                  ["a b"]  ['x']
 *
 * Parsing (and the seed's aliases, `{{step.NAME.x}}` for `{{steps.NAME.result.x}}`) is in
 * templateExpression.ts. A name made only of digits (without a leading zero) is an index. Arrays are indexed by numbers
 * only; objects by their OWN properties only, and `__proto__`, `constructor` and `prototype` are
 * never accepted. A path that does not exist is an error, never an empty string.
 *
 * One resolution may produce at most TEMPLATE_BUDGET_CHARS characters (interpolated text plus
 * the JSON size of every value it substitutes), so a few templates repeating a large result
 * cannot build gigabytes of arguments; past it resolution fails with a BudgetError.
 */

import { TemplateError } from '../errors.js';
import { BudgetError, TEMPLATE_BUDGET_CHARS, measureJson } from './caps.js';
import { parseExpression, type ParsedExpression } from './templateExpression.js';
import { celSource, celTemplateRefs, evaluateCelTemplate } from './celValue.js';

/** The roots a template may start from: input, steps, result, item, index, results, error, workflow, … */
export type TemplateScope = Record<string, unknown>;

/**
 * Where a scope may list the names of steps it refers to that failed (a `ReadonlySet<string>`):
 * `{{steps.NAME…}}` on such a step then says it failed instead of "does not exist". A symbol, so
 * it is never a template root, a condition variable, or part of a resolved value.
 */
export const FAILED_STEPS: unique symbol = Symbol('stepd.failedSteps');

/** One template found by {@link templateRefs}. `root` has the seed's aliases normalized. */
export interface TemplateRef {
  raw: string;
  root: string;
  path: (string | number)[];
}


interface TemplatePart {
  raw: string;
  expr: ParsedExpression;
  /** `{{= CEL }}`: the expression, evaluated by celValue.ts (`expr` is then a placeholder). */
  cel?: string;
}

const CEL_PLACEHOLDER: ParsedExpression = Object.freeze({ root: '=', rootText: '=', path: [], labels: [] }) as ParsedExpression;

/** A string split into literal text and templates, in order. */
type StringPart = string | TemplatePart;

/**
 * Parses one template expression (the text between the braces) into its root and path. The seed's
 * aliases are normalized (`workflow_input` → `input`, `loop_item` → `item`, `step.NAME.x` →
 * `steps.NAME.result.x`). Throws TemplateError on bad syntax.
 */
export function parseTemplateExpression(expr: string): { root: string; path: (string | number)[] } {
  const parsed = parseExpression(expr, `{{${expr}}}`);
  return { root: parsed.root, path: parsed.path };
}

// ---------------------------------------------------------------------------------------------
// Scanning strings

/**
 * Splits a string into literal text and templates, or returns null when it has none. A `}}`
 * inside a quoted key does not close the template. An unclosed `{{` is an error.
 */
function parseString(s: string): StringPart[] | null {
  let open = s.indexOf('{{');
  if (open < 0) return null;
  const parts: StringPart[] = [];
  let last = 0;
  while (open >= 0) {
    if (open > last) parts.push(s.slice(last, open));
    let j = open + 2;
    let quote = 0;
    let close = -1;
    for (; j < s.length; j++) {
      const c = s.charCodeAt(j);
      if (quote !== 0) {
        if (c === 92 /* \ */) j++;
        else if (c === quote) quote = 0;
      } else if (c === 34 || c === 39) {
        quote = c;
      } else if (c === 125 /* } */ && s.charCodeAt(j + 1) === 125) {
        close = j;
        break;
      }
    }
    if (close < 0) {
      const raw = s.slice(open, Math.min(s.length, open + 60));
      throw new TemplateError(`template "${raw}": no closing "}}"`, { template: raw });
    }
    const raw = s.slice(open, close + 2);
    const inner = s.slice(open + 2, close);
    const cel = celSource(inner);
    parts.push(cel !== undefined ? { raw, expr: CEL_PLACEHOLDER, cel } : { raw, expr: parseExpression(inner, raw) });
    last = close + 2;
    open = s.indexOf('{{', last);
  }
  if (last < s.length) parts.push(s.slice(last));
  return parts;
}

// ---------------------------------------------------------------------------------------------
// Resolution

function lookup(part: TemplatePart, scope: TemplateScope): unknown {
  if (part.cel !== undefined) return evaluateCelTemplate(part.cel, part.raw, scope);
  const { expr, raw } = part;
  const known = Object.hasOwn(scope, expr.root) ? scope[expr.root] : undefined;
  if (known === undefined) {
    const roots = Object.keys(scope).filter((k) => scope[k] !== undefined);
    throw new TemplateError(
      `template "${raw}": unknown root "${expr.rootText}" (available here: ${roots.join(', ') || 'none'})`,
      { template: raw, root: expr.rootText },
    );
  }
  let value: unknown = known;
  const { path } = expr;
  for (let k = 0; k < path.length; k++) {
    const seg = path[k] as string | number;
    let next: unknown;
    if (Array.isArray(value)) {
      next = typeof seg === 'number' && seg < value.length ? (value[seg] as unknown) : undefined;
    } else if (typeof value === 'object' && value !== null) {
      const key = typeof seg === 'number' ? String(seg) : seg;
      next = Object.hasOwn(value, key) ? (value as Record<string, unknown>)[key] : undefined;
    }
    if (next === undefined) {
      if (k === 0 && expr.root === 'steps' && typeof seg === 'string') throw missingStep(raw, seg, scope);
      const label = expr.labels[k] as string;
      throw new TemplateError(`template "${raw}": "${label}" does not exist`, {
        template: raw,
        segment: label,
        path: [expr.root, ...path.slice(0, k + 1)],
      });
    }
    value = next;
  }
  return value;
}

/**
 * `{{steps.NAME…}}` for a step with no result here: it failed (the scope lists it under
 * FAILED_STEPS, or it is the step whose error routed here), or no attempt of it has completed in
 * the workflow yet (steps.NAME is the latest done attempt anywhere in the workflow; inside a
 * forEach item, the item's own attempt when it has one — docs/flow-language.md, "Which result").
 */
function missingStep(raw: string, name: string, scope: TemplateScope): TemplateError {
  const failed = (scope as { [FAILED_STEPS]?: ReadonlySet<string> })[FAILED_STEPS];
  const error = scope.error;
  const routedFrom = typeof error === 'object' && error !== null && (error as { step?: unknown }).step === name;
  const why =
    failed?.has(name) === true || routedFrom
      ? `step "${name}" failed and has no result${routedFrom ? ' (its error is {{error}})' : ''}`
      : `step "${name}" has no result: no attempt of it has completed in this workflow yet`;
  return new TemplateError(`template "${raw}": ${why}`, { template: raw, segment: name, path: ['steps', name] });
}

/** What one resolution may still produce; sizes of substituted objects are measured once. */
interface Budget {
  remaining: number;
  readonly sizes: WeakMap<object, number>;
}

function spend(budget: Budget, value: unknown, template: string): void {
  let units = 8;
  if (typeof value === 'string') units = value.length;
  else if (typeof value === 'object' && value !== null) {
    const known = budget.sizes.get(value);
    units = known ?? measureJson(value, { maxBytes: budget.remaining + 1, maxDepth: Number.MAX_SAFE_INTEGER }).bytes;
    if (known === undefined) budget.sizes.set(value, units);
  }
  budget.remaining -= units;
  if (budget.remaining < 0) {
    throw new BudgetError(`template "${template}": resolving templates would produce more than ${TEMPLATE_BUDGET_CHARS} characters`, {
      budget: 'template',
      limit: TEMPLATE_BUDGET_CHARS,
      template,
    });
  }
}

function interpolate(parts: StringPart[], scope: TemplateScope, budget: Budget): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'string') {
      out += part;
      continue;
    }
    const value = lookup(part, scope);
    spend(budget, value, part.raw);
    if (typeof value === 'string') out += value;
    else if (typeof value === 'bigint') out += value.toString();
    else {
      const text = JSON.stringify(value);
      if (text === undefined) throw new TemplateError(`template "${part.raw}": the value cannot be written as text`, { template: part.raw });
      out += text;
    }
  }
  return out;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  else target[key] = value;
}

/**
 * Resolves every template in a JSON value. Returns new arrays and objects; the input is not
 * changed. A string that is exactly one template becomes the value itself (any type); templates
 * inside text are interpolated (strings as they are, anything else as JSON). Values that come out
 * of the scope are never scanned for templates themselves.
 */
export function resolveTemplates(value: unknown, scope: TemplateScope): unknown {
  return resolveWithin(value, scope, { remaining: TEMPLATE_BUDGET_CHARS, sizes: new WeakMap() });
}

function resolveWithin(value: unknown, scope: TemplateScope, budget: Budget): unknown {
  if (typeof value === 'string') {
    const parts = parseString(value);
    if (parts === null) return value;
    const first = parts[0];
    if (parts.length === 1 && typeof first === 'object' && first.raw.length === value.length) {
      const found = lookup(first, scope);
      spend(budget, found, first.raw);
      return found;
    }
    return interpolate(parts, scope, budget);
  }
  if (Array.isArray(value)) return value.map((item: unknown) => resolveWithin(item, scope, budget));
  if (typeof value === 'object' && value !== null && isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) setOwn(out, key, resolveWithin((value as Record<string, unknown>)[key], scope, budget));
    return out;
  }
  return value;
}

function collectRefs(value: unknown, out: TemplateRef[]): void {
  if (typeof value === 'string') {
    const parts = parseString(value);
    if (parts === null) return;
    for (const part of parts) {
      if (typeof part === 'string') continue;
      if (part.cel !== undefined) for (const ref of celTemplateRefs(part.cel, part.raw)) out.push({ raw: part.raw, ...ref });
      else out.push({ raw: part.raw, root: part.expr.root, path: part.expr.path });
    }
  } else if (Array.isArray(value)) {
    for (const item of value) collectRefs(item, out);
  } else if (typeof value === 'object' && value !== null && isPlainObject(value)) {
    for (const key of Object.keys(value)) collectRefs((value as Record<string, unknown>)[key], out);
  }
}

/**
 * Every template in a JSON value, in document order, for validation: `raw` is the template as
 * written (`{{ input.x }}`), `root` is normalized (`input` for `workflow_input`, `item` for
 * `loop_item`). Throws TemplateError on bad syntax.
 */
export function templateRefs(value: unknown): TemplateRef[] {
  const out: TemplateRef[] = [];
  collectRefs(value, out);
  return out;
}
