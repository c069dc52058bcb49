/**
 * What a flow may ask for: the operator's caps (config section `"caps"`, all optional) and the
 * fixed limits that keep every value the executor handles within what JavaScript and PostgreSQL
 * can process. Pure: no I/O, no module state. User documentation: docs/caps-and-budgets.md.
 *
 *   cap                 default    applies
 *   steps               10,000     a flow's `maxSteps` (step rows per workflow) — at admission
 *   forEachItems        10,000     items of one forEach — when it fans out
 *   forEachConcurrency  1,000      a forEach's `concurrency` — at admission; omitted = this cap
 *   inputBytes          1 MiB      a workflow's input (as JSON) — at admission
 *   resultBytes         4 MiB      a step's result (as JSON) — when the step finishes
 *   outputBytes         4 MiB      a workflow's output (as JSON) — when it completes
 *   subWorkflowDepth    10         how deep a sub-workflow may be (top level = 0) — when its step starts it
 *   subWorkflows        1,000      child workflows (at any depth) one top-level workflow may start — when a step starts one
 *   flowSteps           2,000      steps defined in one flow — before it is compiled (and by the database, sql/0021)
 *
 * Fixed: JSON nested at most {@link MAX_JSON_DEPTH} levels (flow, input, results), names at most
 * {@link MAX_NAME_BYTES} bytes of UTF-8 without control characters.
 */
import { StepError, type ErrorData } from '../errors.js';
import type { CapsConfig } from '../configFile.js';

export interface Caps {
  steps: number;
  forEachItems: number;
  forEachConcurrency: number;
  inputBytes: number;
  resultBytes: number;
  outputBytes: number;
  subWorkflowDepth: number;
  subWorkflows: number;
  flowSteps: number;
}

export const DEFAULT_CAPS: Readonly<Caps> = Object.freeze({
  steps: 10_000,
  forEachItems: 10_000,
  forEachConcurrency: 1_000,
  inputBytes: 1024 * 1024,
  resultBytes: 4 * 1024 * 1024,
  outputBytes: 4 * 1024 * 1024,
  subWorkflowDepth: 10,
  subWorkflows: 1_000,
  flowSteps: 2_000,
});

/** The deepest any JSON value may nest (flow, input, result, output). */
export const MAX_JSON_DEPTH = 100;
/** Step and workflow names: at most this many bytes of UTF-8. */
export const MAX_NAME_BYTES = 200;
/** Characters one template resolution may produce (interpolated text and substituted values). */
export const TEMPLATE_BUDGET_CHARS = 16 * 1024 * 1024;

/** The config's caps over the defaults. */
export function resolveCaps(config?: CapsConfig): Readonly<Caps> {
  if (!config) return DEFAULT_CAPS;
  const out: Caps = { ...DEFAULT_CAPS };
  for (const key of Object.keys(DEFAULT_CAPS) as (keyof Caps)[]) {
    const value = config[key];
    if (value !== undefined) out[key] = value;
  }
  return Object.freeze(out);
}

/** An evaluation (condition, template) ran past its budget. Never retryable. */
export class BudgetError extends StepError {
  constructor(message: string, details?: unknown) {
    super('budget_exceeded', message, { retryable: false, details });
    this.name = 'BudgetError';
  }
}

/** A value or a request is above one of the operator's caps or a fixed limit. Never retryable. */
export class CapExceededError extends StepError {
  constructor(message: string, details: { cap: string; limit: number; actual?: number }) {
    super('cap_exceeded', message, { retryable: false, details });
    this.name = 'CapExceededError';
  }
}

// ---------------------------------------------------------------------------------------------
// Measuring JSON without recursion

export interface JsonMeasure {
  /** Approximate size as JSON text, in bytes (exact for ASCII without escapes). */
  bytes: number;
  /** Which limit was passed first, if any; measuring stops there. */
  over?: 'bytes' | 'depth';
}

function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) n += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1;
  }
  return n;
}

/**
 * Size and depth of a JSON value, walked with an explicit stack (a value nested 100,000 deep
 * cannot overflow it) and stopped as soon as a limit is passed, so it costs at most the limit.
 */
export function measureJson(value: unknown, limits: { maxBytes: number; maxDepth?: number }): JsonMeasure {
  const maxDepth = limits.maxDepth ?? MAX_JSON_DEPTH;
  let bytes = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'string') bytes += utf8Length(v) + 2;
    else if (typeof v === 'number' || typeof v === 'bigint') bytes += String(v).length;
    else if (typeof v === 'boolean') bytes += v ? 4 : 5;
    else if (v === null || v === undefined) bytes += 4;
    else if (typeof v === 'object') {
      if (depth >= maxDepth) return { bytes, over: 'depth' };
      bytes += 2;
      if (Array.isArray(v)) {
        bytes += Math.max(0, v.length - 1);
        for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], depth + 1]);
      } else {
        const keys = Object.keys(v);
        bytes += Math.max(0, keys.length - 1);
        for (const key of keys) {
          bytes += utf8Length(key) + 3;
          stack.push([(v as Record<string, unknown>)[key], depth + 1]);
        }
      }
    }
    if (bytes > limits.maxBytes) return { bytes, over: 'bytes' };
  }
  return { bytes };
}

/**
 * The error for a value above its cap or nested too deep, or undefined when it fits. `what`
 * names the value in the message ("the input", "step \"x\"'s result").
 */
export function valueCapError(what: string, value: unknown, cap: 'inputBytes' | 'resultBytes' | 'outputBytes', caps: Readonly<Caps>): ErrorData | undefined {
  const limit = caps[cap];
  const m = measureJson(value, { maxBytes: limit });
  if (m.over === 'depth') {
    return new CapExceededError(`${what} nests deeper than ${MAX_JSON_DEPTH} levels`, { cap: 'jsonDepth', limit: MAX_JSON_DEPTH }).toJSON();
  }
  if (m.over === 'bytes') {
    return new CapExceededError(`${what} is larger than caps.${cap} (${limit} bytes)`, { cap, limit, actual: m.bytes }).toJSON();
  }
  return undefined;
}

/**
 * Why a workflow row cannot start although its flow is valid: a name PostgreSQL or an event
 * cannot carry (`invalid_name`), an input above caps.inputBytes or nested too deep
 * (`cap_exceeded`). Undefined when it may start.
 */
export function admissionProblem(name: string, input: unknown, caps: Readonly<Caps>): ErrorData | undefined {
  const bad = nameProblem(name);
  if (bad) return { code: 'invalid_name', message: `workflow name: ${bad}`, retryable: false };
  return valueCapError('the input', input, 'inputBytes', caps);
}

// ---------------------------------------------------------------------------------------------
// Names and text PostgreSQL will store

/** What is wrong with a step or workflow name, or undefined. */
export function nameProblem(name: string): string | undefined {
  if (utf8Length(name) > MAX_NAME_BYTES) return `a name must be at most ${MAX_NAME_BYTES} bytes (UTF-8), this one has ${utf8Length(name)}`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'a name must not contain control characters';
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(name)) return 'a name must not contain a lone UTF-16 surrogate';
  return undefined;
}

/**
 * Text PostgreSQL's jsonb accepts: NUL and lone surrogates (which an error message may quote
 * from bad input, e.g. half of an emoji) become U+FFFD, and the text is cut to `max` characters.
 */
export function storableText(s: string, max = 1_000): string {
  // eslint-disable-next-line no-control-regex
  const clean = s.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
  if (clean.length <= max) return clean;
  let cut = clean.slice(0, max);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** Flow issues made storable: at most `max` of them (with a note of how many more), texts cleaned and cut. */
export function storableIssues(issues: readonly { path: string; message: string }[], max = 50): { path: string; message: string }[] {
  const out = issues.slice(0, max).map((i) => ({ path: storableText(i.path, 300), message: storableText(i.message) }));
  if (issues.length > max) out.push({ path: '', message: `… and ${issues.length - max} more issue(s)` });
  return out;
}
