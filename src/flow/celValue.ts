/**
 * Computed values in templates: `{{= CEL }}` evaluates a CEL expression (the language of
 * conditions, conditions.ts) over the template's scope — `{{= input.n + 1 }}`,
 * `{{= size(steps.search.result.hits) }}`, `{{= item.price * 1.2 }}` — under the CEL budget
 * (celBudget.ts). The value keeps its type when the string is exactly one template, as any
 * template does; inside text it is interpolated. Pure: no I/O, no module state.
 *
 * Numbers come back as JSON numbers (a CEL int beyond 2^53 is an error rather than a rounded
 * number); lists and maps as arrays and objects; a timestamp as ISO text. A `}}` inside the
 * expression ends the template, so nested map literals are written `{'a': {'b': 1} }`.
 */
import type { Environment } from '@marcbachmann/cel-js';
import { TemplateError } from '../errors.js';
import { BudgetError } from './caps.js';
import { CONDITION_BUDGET, instrument, newMeter, staticBudgetProblem } from './celBudget.js';
import { celProblem, conditionRefs, createEnvironment, toCel } from './conditions.js';
import { conditionStepRefs } from './forkPolicy.js';

/** The marker after `{{` that makes a template a CEL expression. */
export const CEL_TEMPLATE_MARK = '=';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether the text between the braces is a CEL expression (`= …`); returns the expression. */
export function celSource(inner: string): string | undefined {
  // Called for every template: look at the first non-blank character without copying the text.
  let i = 0;
  while (i < inner.length && (inner[i] === ' ' || inner[i] === '\t' || inner[i] === '\n' || inner[i] === '\r')) i++;
  return inner[i] === CEL_TEMPLATE_MARK ? inner.slice(i + 1).trim() : undefined;
}

/** The roots and step names a CEL template reads, for validation (throws TemplateError when it does not parse). */
export function celTemplateRefs(source: string, raw: string): { root: string; path: string[] }[] {
  if (source === '') throw new TemplateError(`template "${raw}": the expression after "=" is empty`, { template: raw });
  let roots: string[];
  try {
    roots = conditionRefs(source);
  } catch (err) {
    throw new TemplateError(`template "${raw}": ${(err as Error).message.replace(/^condition/, 'expression')}`, { template: raw });
  }
  const out: { root: string; path: string[] }[] = [];
  for (const root of roots) {
    if (root !== 'steps') out.push({ root, path: [] });
  }
  if (roots.includes('steps')) {
    const names = conditionStepRefs(source);
    if (names.length === 0) out.push({ root: 'steps', path: [] });
    for (const name of names) out.push({ root: 'steps', path: [name] });
  }
  return out;
}

/** Evaluates `{{= source }}` over `scope` (its own identifier-named keys are the variables). */
export function evaluateCelTemplate(source: string, raw: string, scope: Record<string, unknown>): unknown {
  const names = Object.keys(scope).filter((k) => IDENTIFIER.test(k) && scope[k] !== undefined);
  let env: Environment;
  let program;
  try {
    env = createEnvironment(names);
    program = env.parse(source);
  } catch (err) {
    throw new TemplateError(`template "${raw}": the expression does not parse: ${celProblem(err).text}`, { template: raw });
  }
  const checked = program.check();
  if (!checked.valid) throw new TemplateError(`template "${raw}": ${celProblem(checked.error).text} (available here: ${names.join(', ')})`, { template: raw });
  const tooCostly = staticBudgetProblem(program.ast);
  if (tooCostly) throw new BudgetError(`template "${raw}" exceeds its budget: ${tooCostly}`, { budget: 'condition', limit: CONDITION_BUDGET });
  const meter = newMeter(source);
  instrument(program.ast, meter);
  const context: Record<string, unknown> = {};
  for (const name of names) context[name] = toCel(scope[name]);
  let value: unknown;
  try {
    value = program(context);
  } catch (err) {
    if (err instanceof BudgetError) throw err;
    throw new TemplateError(`template "${raw}": ${celProblem(err).text}`, { template: raw });
  }
  if (meter.remaining < 0) throw new BudgetError(`template "${raw}" exceeded its evaluation budget of ${CONDITION_BUDGET} units`, { budget: 'condition', limit: CONDITION_BUDGET });
  return fromCel(value, raw);
}

/** CEL value → JSON value. */
export function fromCel(value: unknown, raw: string): unknown {
  switch (typeof value) {
    case 'bigint':
      if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
        throw new TemplateError(`template "${raw}": the integer ${value} is too large for JSON`, { template: raw });
      }
      return Number(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TemplateError(`template "${raw}": the result ${value} is not a JSON number`, { template: raw });
      return value;
    case 'string':
    case 'boolean':
      return value;
    case 'undefined':
      return null;
    case 'object': {
      if (value === null) return null;
      if (Array.isArray(value)) return value.map((v) => fromCel(v, raw));
      if (value instanceof Date) return value.toISOString();
      if (value instanceof Map) {
        const out: Record<string, unknown> = {};
        for (const [k, v] of value) setOwn(out, String(k), fromCel(v, raw));
        return out;
      }
      if (value instanceof Uint8Array) throw new TemplateError(`template "${raw}": bytes cannot be written as JSON`, { template: raw });
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return String(value);
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) setOwn(out, key, fromCel((value as Record<string, unknown>)[key], raw));
      return out;
    }
    default:
      throw new TemplateError(`template "${raw}": the result cannot be written as JSON`, { template: raw });
  }
}

function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}
