/**
 * Steps that wait for a signal, the pure part: `{ "signal": { "name": N | [N…], "key"?, "since"?,
 * "timeout"? } }` — what it may be combined with, its compiled form, and the wait a row records
 * (`args.signal`) once its key template is resolved. No I/O: the executor side is
 * src/executor/transitions/signalWaits.ts, the matching is in the database (sql/0025).
 */
import { StepError } from '../errors.js';
import type { CompiledStep } from './compiled.js';
import type { FlowIssue, StepSpec } from './spec.js';
import { resolveTemplates, type TemplateScope } from './templates.js';
import type { CompiledSignalWait, SignalSince } from './compiledSignalWait.js';

/** As the signals table checks them (sql/0024): bytes of UTF-8, no C0/C1 control characters. */
export const SIGNAL_NAME_MAX_BYTES = 200;
export const SIGNAL_KEY_MAX_BYTES = 500;
const CONTROL = /[\u0001-\u001f\u007f-\u009f]/;

/** The step fails with this code when its timeout passes before a signal came (not retryable). */
export const SIGNAL_TIMEOUT = 'signal_timeout';

/** Why `text` cannot be a signal's name or key, or undefined when it can. */
export function signalTextProblem(what: 'name' | 'key', text: string): string | undefined {
  const max = what === 'name' ? SIGNAL_NAME_MAX_BYTES : SIGNAL_KEY_MAX_BYTES;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes === 0) return `a signal ${what} must not be empty`;
  if (bytes > max) return `a signal ${what} is at most ${max} bytes (got ${bytes})`;
  if (CONTROL.test(text)) return `a signal ${what} must not contain control characters`;
  return undefined;
}

/**
 * Issues of a `signal` step's own fields and of combining it with what a wait cannot have;
 * `durationMs` parses the timeout (reporting its own issue).
 */
export function compileSignalWait(
  s: StepSpec,
  at: string,
  has: { hasTool: boolean; isFork: boolean },
  issues: FlowIssue[],
  durationMs: (value: string | number | undefined, path: string) => number | undefined,
): CompiledSignalWait | undefined {
  const spec = s.signal;
  if (spec === undefined) return undefined;
  const refuse = (key: string, message: string) => issues.push({ path: `${at}.${key}`, message });
  if (has.hasTool) refuse('signal', 'a step cannot have both a tool and a signal wait; put them in two steps');
  if (has.isFork) refuse('signal', 'a signal wait cannot also fan out; to race work against a signal, make the wait one branch of a "parallel"');
  if (s.approval !== undefined) refuse('approval', 'a signal wait cannot also be an approval; put the gate in a step of its own');
  if (s.wait !== undefined) refuse('wait', 'a signal wait cannot also be a timer; give the signal a "timeout" instead');
  if (s.workflow !== undefined) refuse('workflow', 'a signal wait cannot also start a sub-workflow; put them in two steps');
  if (s.timeout !== undefined) refuse('timeout', 'a signal wait\'s timeout goes inside it: "signal": { "name": …, "timeout": "24h" }');
  if (s.retry !== undefined) refuse('retry', 'a signal wait is not retried; route "signal_timeout" with onError');
  const names = typeof spec.name === 'string' ? [spec.name] : spec.name;
  if (names.length === 0) refuse('signal.name', 'signal.name must name at least one signal');
  names.forEach((name, i) => {
    const problem = signalTextProblem('name', name);
    if (problem) refuse(typeof spec.name === 'string' ? 'signal.name' : `signal.name[${i}]`, problem);
  });
  if (new Set(names).size !== names.length) refuse('signal.name', 'a signal name is listed twice');
  if (spec.key !== undefined && !spec.key.includes('{{')) {
    const problem = signalTextProblem('key', spec.key);
    if (problem) refuse('signal.key', problem);
  }
  const wait: CompiledSignalWait = { names: [...names], since: spec.since ?? 'workflow' };
  if (spec.key !== undefined) wait.key = spec.key;
  const timeoutMs = durationMs(spec.timeout, `${at}.signal.timeout`);
  if (timeoutMs !== undefined) {
    if (timeoutMs <= 0) refuse('signal.timeout', 'signal.timeout must be greater than zero');
    wait.timeoutMs = timeoutMs;
  }
  return wait;
}

/** A wait with its key resolved: what a row records in `args.signal` (since filled in by the database). */
export interface ResolvedSignalWait {
  names: string[];
  key: string | null;
  since: SignalSince;
}

/** The wait a new row records: names and since as compiled, the key template resolved in `scope`. */
export function resolveSignalWait(step: CompiledStep, scope: TemplateScope): ResolvedSignalWait {
  const wait = step.signal;
  if (!wait) throw new StepError('bad_step', `step "${step.name}" does not wait for a signal`);
  if (wait.key === undefined) return { names: wait.names, key: null, since: wait.since };
  const value = resolveTemplates(wait.key, scope);
  if (typeof value !== 'string' && typeof value !== 'number') {
    throw new StepError('invalid_signal_key', `the signal key of step "${step.name}" must be text or a number (got ${value === null ? 'null' : typeof value})`, { retryable: false });
  }
  const key = String(value);
  const problem = signalTextProblem('key', key);
  if (problem) throw new StepError('invalid_signal_key', `step "${step.name}": ${problem}`, { retryable: false });
  return { names: wait.names, key, since: wait.since };
}
