/**
 * Branch conditions: CEL expressions (Common Expression Language) evaluated by
 * `@marcbachmann/cel-js` — parsed and type-checked once, evaluated many times, never `eval`.
 *
 * The seed's six forms keep their original meaning and are matched before CEL:
 *
 *   result == true      result is true or "true"
 *   result == false     result is false or "false"
 *   result != nil       result is not null, "" or "nil"
 *   result == nil       result is null, "" or "nil"
 *   result == word      result is the string "word"
 *   result != word      result is not the string "word"
 *
 * Numbers. JSON has one number type; CEL has int and double and no implicit conversion between
 * them. Values are therefore converted on the way in: a whole JS number becomes a CEL int
 * (BigInt), any other number stays a double. Comparisons across int and double are built into
 * CEL; arithmetic across them (`result.score * 2`) is registered here and yields a double.
 * Integer division stays integer division (`3 / 2 == 1`), as CEL defines it.
 *
 * Variables are declared `dyn`, and undeclared identifiers are rejected when the condition is
 * compiled (`foo == 1` → ConditionError naming `foo`).
 *
 * Every evaluation runs under a cost budget (celBudget.ts): a runaway condition fails with a
 * BudgetError (`budget_exceeded`) in milliseconds, and one that obviously cannot fit (too deeply
 * nested comprehensions) is refused when it is compiled.
 */

import { Environment, type ASTNode } from '@marcbachmann/cel-js';
import { ConditionError } from '../errors.js';
import { BudgetError } from './caps.js';
import { CEL_PARSE_LIMITS, CONDITION_BUDGET, instrument, newMeter, staticBudgetProblem } from './celBudget.js';

/** The values a condition can see; absent ones are null. Aliases (forEach `as`) go alongside. */
export interface ConditionVars {
  result?: unknown;
  input?: unknown;
  steps?: unknown;
  item?: unknown;
  index?: unknown;
  error?: unknown;
  [alias: string]: unknown;
}

export interface CompiledCondition {
  readonly source: string;
  evaluate(vars: ConditionVars): boolean;
}

/** The variables every condition may use. */
export const CONDITION_ROOTS: readonly string[] = Object.freeze(['result', 'input', 'steps', 'item', 'index', 'error']);

/** Words that CEL reserves or that cannot name a variable. */
const RESERVED_NAMES: ReadonlySet<string> = new Set([
  'true', 'false', 'null', 'in', 'as', 'break', 'const', 'continue', 'else', 'for', 'function', 'if',
  'import', 'let', 'loop', 'package', 'namespace', 'return', 'var', 'void', 'while', '__proto__', 'prototype',
]);

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `result == word` / `result != word`, whitespace-tolerant; no nested quantifiers. */
const SEED_FORM = /^\s*result\s*(==|!=)\s*([A-Za-z_][A-Za-z0-9_]*)\s*$/;

// ---------------------------------------------------------------------------------------------
// The seed's six forms

function isSeedNil(value: unknown): boolean {
  return value === null || value === undefined || value === '' || value === 'nil';
}

function seedCondition(source: string, roots: ReadonlySet<string>): CompiledCondition | null {
  const match = SEED_FORM.exec(source);
  if (!match) return null;
  const op = match[1] as '==' | '!=';
  const word = match[2] as string;
  let test: (result: unknown) => boolean;
  if (word === 'true' || word === 'false') {
    if (op !== '==') return null; // `result != true` is CEL
    test = (result) => result === (word === 'true') || result === word;
  } else if (word === 'nil') {
    test = op === '==' ? isSeedNil : (result) => !isSeedNil(result);
  } else if (word === 'null' || roots.has(word)) {
    return null; // `result == null`, `result == input`: CEL
  } else {
    test = op === '==' ? (result) => result === word : (result) => result !== word;
  }
  return Object.freeze({ source, evaluate: (vars: ConditionVars) => test(vars.result) });
}

// ---------------------------------------------------------------------------------------------
// Values into CEL

const MAX_INT = 2 ** 63;

/**
 * JSON value → CEL value: whole numbers become BigInt; arrays and plain objects are copied with
 * only their own enumerable properties (into null-prototype objects, so nothing is inherited).
 */
export function toCel(value: unknown): unknown {
  switch (typeof value) {
    case 'number':
      return Number.isInteger(value) && value > -MAX_INT && value < MAX_INT ? BigInt(value) : value;
    case 'object': {
      if (value === null) return null;
      if (Array.isArray(value)) return value.map(toCel);
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return value;
      const out = Object.create(null) as Record<string, unknown>;
      for (const key of Object.keys(value)) {
        const item = (value as Record<string, unknown>)[key];
        if (item !== undefined) out[key] = toCel(item);
      }
      return out;
    }
    case 'undefined':
      return null;
    default:
      return value;
  }
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'bigint') return `int ${value}`;
  if (typeof value === 'number') return `double ${value}`;
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (Array.isArray(value)) return 'list';
  if (typeof value === 'object') return 'map';
  return typeof value;
}

// ---------------------------------------------------------------------------------------------
// The environment

export function createEnvironment(roots: readonly string[]): Environment {
  const env = new Environment({ unlistedVariablesAreDyn: false, homogeneousAggregateLiterals: false, limits: CEL_PARSE_LIMITS });
  for (const name of roots) env.registerVariable(name, 'dyn');
  // Mixed int/double arithmetic, which CEL leaves undefined but JSON numbers make unavoidable.
  env
    .registerOperator('double + int: double', (a: number, b: bigint) => a + Number(b))
    .registerOperator('int + double: double', (a: bigint, b: number) => Number(a) + b)
    .registerOperator('double - int: double', (a: number, b: bigint) => a - Number(b))
    .registerOperator('int - double: double', (a: bigint, b: number) => Number(a) - b)
    .registerOperator('double * int: double', (a: number, b: bigint) => a * Number(b))
    .registerOperator('int * double: double', (a: bigint, b: number) => Number(a) * b)
    .registerOperator('double / int: double', (a: number, b: bigint) => a / Number(b))
    .registerOperator('int / double: double', (a: bigint, b: number) => Number(a) / b);
  return env;
}

interface CelErrorLike {
  summary?: unknown;
  message?: unknown;
  code?: unknown;
  range?: { start: number; end: number };
}

export function celProblem(err: unknown): { text: string; code: string | undefined; range: unknown } {
  const e = (typeof err === 'object' && err !== null ? err : {}) as CelErrorLike;
  const summary = typeof e.summary === 'string' ? e.summary : typeof e.message === 'string' ? e.message.split('\n')[0] : String(err);
  const at = e.range && typeof e.range.start === 'number' ? ` at column ${e.range.start + 1}` : '';
  return { text: `${summary}${at}`, code: typeof e.code === 'string' ? e.code : undefined, range: e.range };
}

function rootsFor(extraRoots: readonly string[], source: string): string[] {
  const roots = new Set(CONDITION_ROOTS);
  for (const name of extraRoots) {
    if (!IDENTIFIER.test(name) || RESERVED_NAMES.has(name)) {
      throw new ConditionError(`condition "${source}": "${name}" cannot be used as a variable name`, { source, variable: name });
    }
    roots.add(name);
  }
  return [...roots];
}

/** The variables of a condition, as a list (declaration order) and a set. */
interface Roots {
  list: string[];
  set: ReadonlySet<string>;
  env?: Environment;
}

/**
 * The CEL environments of one flow's conditions, one per set of variables. Creating an
 * environment costs about ten times as much as parsing and checking a condition in it, and a flow
 * may name hundreds of forEach aliases, so a flow shares both the environment and its variable
 * list: a flow of 2,000 branch steps compiles in tens of milliseconds instead of seconds.
 * Environments are not changed after creation; a compiled condition keeps only its own AST.
 */
export class ConditionEnvironments {
  /** Keyed by the caller's `extraRoots` array (validate.ts passes the same one for a whole flow). */
  readonly #byExtra = new Map<readonly string[], Roots>();

  roots(extraRoots: readonly string[], source: string): Roots {
    let roots = this.#byExtra.get(extraRoots);
    if (!roots) {
      const list = rootsFor(extraRoots, source);
      roots = { list, set: new Set(list) };
      this.#byExtra.set(extraRoots, roots);
    }
    return roots;
  }

  env(roots: Roots): Environment {
    return (roots.env ??= createEnvironment(roots.list));
  }
}

/**
 * Compiles a condition once. Throws ConditionError when it does not parse, names an unknown
 * variable, or cannot produce a boolean. The result's `evaluate` throws ConditionError when
 * evaluation fails (no such key, type errors) or yields something other than a boolean.
 * `envs`: environments shared with the flow's other conditions (validate.ts passes one per flow).
 */
export function compileCondition(source: string, extraRoots: readonly string[] = [], envs: ConditionEnvironments = new ConditionEnvironments()): CompiledCondition {
  const shared = envs.roots(extraRoots, source);
  const seed = seedCondition(source, shared.set);
  if (seed) return seed;

  if (source.trim() === '') throw new ConditionError('condition is empty', { source });
  const env = envs.env(shared);
  let program: ReturnType<Environment['parse']>;
  try {
    program = env.parse(source);
  } catch (err) {
    const p = celProblem(err);
    throw new ConditionError(`condition "${source}" does not parse: ${p.text}`, { source, code: p.code, range: p.range });
  }
  const checked = program.check();
  if (!checked.valid) {
    const p = celProblem(checked.error);
    throw new ConditionError(`condition "${source}" is invalid: ${p.text}`, { source, code: p.code, range: p.range });
  }
  if (checked.type !== 'bool' && checked.type !== 'dyn') {
    throw new ConditionError(`condition must evaluate to a boolean, got ${checked.type} (condition "${source}")`, { source, type: checked.type });
  }

  const tooCostly = staticBudgetProblem(program.ast);
  if (tooCostly) throw new ConditionError(`condition "${source}" exceeds its budget: ${tooCostly}`, { source, code: 'budget_exceeded' });

  const used = conditionRootsOf(program.ast).filter((name) => shared.set.has(name));
  const run = program;
  const meter = newMeter(source);
  instrument(program.ast, meter);
  return Object.freeze({
    source,
    evaluate(vars: ConditionVars): boolean {
      const context: Record<string, unknown> = {};
      // Only the variables the condition names: a flow's hundreds of aliases cost nothing here.
      for (const name of used) context[name] = Object.hasOwn(vars, name) ? toCel(vars[name]) : null;
      let value: unknown;
      meter.remaining = CONDITION_BUDGET;
      try {
        value = run(context);
      } catch (err) {
        if (err instanceof BudgetError) throw err;
        const p = celProblem(err);
        throw new ConditionError(`condition "${source}" failed: ${p.text}`, { source, code: p.code, range: p.range });
      }
      // `a || b` swallows an error on one side when the other decides; a spent budget still fails.
      if (meter.remaining < 0) throw new BudgetError(`condition "${source}" exceeded its evaluation budget of ${CONDITION_BUDGET} units`, { budget: 'condition', limit: CONDITION_BUDGET });
      if (typeof value !== 'boolean') {
        throw new ConditionError(`condition must evaluate to a boolean, got ${describe(value)} (condition "${source}")`, { source });
      }
      return value;
    },
  });
}

// ---------------------------------------------------------------------------------------------
// References

/** Receiver macros whose leading identifier arguments are bound variables, not references. */
const BINDING_MACROS: ReadonlySet<string> = new Set([
  'all', 'exists', 'exists_one', 'existsOne', 'map', 'filter', 'sortBy',
  'transformList', 'transformMap', 'transformMapEntry',
]);

function conditionRootsOf(ast: ASTNode): string[] {
  const found = new Set<string>();
  const walk = (node: unknown, bound: ReadonlySet<string>): void => {
    if (Array.isArray(node)) {
      for (const child of node) walk(child, bound);
      return;
    }
    if (typeof node !== 'object' || node === null || !('op' in node)) return;
    const { op, args } = node as { op: string; args: unknown };
    if (op === 'id') {
      if (typeof args === 'string' && !bound.has(args)) found.add(args);
      return;
    }
    if (op === 'value') return;
    if (op === 'rcall' && Array.isArray(args)) {
      const [name, receiver, callArgs] = args as [unknown, unknown, unknown];
      if (typeof name === 'string' && Array.isArray(callArgs)) {
        const isBind = name === 'bind' && isId(receiver, 'cel');
        if (isBind || BINDING_MACROS.has(name)) {
          const inner = new Set(bound);
          let k = 0;
          // Leading bare identifiers (never the last argument) name the macro's variables.
          for (; k < callArgs.length - 1; k++) {
            const arg = callArgs[k] as unknown;
            const id = idName(arg);
            if (id === undefined) break;
            inner.add(id);
            if (isBind) {
              k++;
              break;
            }
          }
          if (!isBind) walk(receiver, bound);
          for (let m = k; m < callArgs.length; m++) {
            // cel.bind(x, init, body): init is evaluated outside the binding.
            walk(callArgs[m], isBind && m === k ? bound : inner);
          }
          return;
        }
      }
    }
    walk(args, bound);
  };
  walk(ast, new Set());
  return [...found];
}

function idName(node: unknown): string | undefined {
  if (typeof node !== 'object' || node === null) return undefined;
  const { op, args } = node as { op?: unknown; args?: unknown };
  return op === 'id' && typeof args === 'string' ? args : undefined;
}

function isId(node: unknown, name: string): boolean {
  return idName(node) === name;
}

/**
 * The top-level identifiers a condition uses (`result`, `steps`, …), for validation. Identifiers
 * bound by macros (`x` in `list.exists(x, …)`) are not included. Pass the same `extraRoots` as to
 * compileCondition. Throws ConditionError when the condition does not parse.
 */
export function conditionRefs(source: string, extraRoots: readonly string[] = []): string[] {
  const roots = rootsFor(extraRoots, source);
  if (seedCondition(source, new Set(roots))) return ['result'];
  const env = new Environment({ unlistedVariablesAreDyn: true, homogeneousAggregateLiterals: false, limits: CEL_PARSE_LIMITS });
  try {
    return conditionRootsOf(env.parse(source).ast);
  } catch (err) {
    const p = celProblem(err);
    throw new ConditionError(`condition "${source}" does not parse: ${p.text}`, { source, code: p.code, range: p.range });
  }
}
