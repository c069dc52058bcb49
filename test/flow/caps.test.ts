import { describe, expect, it } from 'vitest';
import {
  DEFAULT_CAPS,
  MAX_JSON_DEPTH,
  MAX_NAME_BYTES,
  admissionProblem,
  measureJson,
  nameProblem,
  resolveCaps,
  storableIssues,
  storableText,
  valueCapError,
} from '../../src/flow/caps.js';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';
import { resolveSuccess } from '../../src/flow/transitions.js';
import type { CompiledFlow } from '../../src/flow/compiled.js';

function nested(levels: number, leaf: unknown = 1): unknown {
  let v = leaf;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

const noop = (more: Record<string, unknown> = {}) => ({ tool: 'core.noop', ...more });
const forEachFlow = (forEach: Record<string, unknown>) => ({
  start: 'each',
  steps: { each: { forEach: { items: '{{input.items}}', step: 'work', ...forEach }, join: 'end' }, work: noop(), end: noop({ done: true }) },
});

function compiled(raw: unknown, caps = DEFAULT_CAPS): CompiledFlow {
  const r = compileFlow(raw, { caps });
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.flow;
}

describe('resolveCaps', () => {
  it('takes the defaults for caps the config leaves out', () => {
    expect(resolveCaps()).toEqual(DEFAULT_CAPS);
    expect(resolveCaps({ steps: 5 })).toEqual({ ...DEFAULT_CAPS, steps: 5 });
  });
});

describe('measureJson', () => {
  it('matches the JSON text length for ASCII values and counts UTF-8 bytes', () => {
    const value = { a: [1, true, null, 'text'], b: { c: -2.5 } };
    expect(measureJson(value, { maxBytes: 1e9 }).bytes).toBe(JSON.stringify(value).length);
    expect(measureJson('é🙂', { maxBytes: 1e9 }).bytes).toBe(Buffer.byteLength(JSON.stringify('é🙂')));
  });

  it('walks a value nested 100,000 deep without overflowing the stack and stops at the depth limit', () => {
    expect(measureJson(nested(100_000), { maxBytes: 1e9 }).over).toBe('depth');
    expect(measureJson(nested(MAX_JSON_DEPTH - 1), { maxBytes: 1e9 }).over).toBeUndefined();
  });

  it('stops as soon as the byte limit is passed', () => {
    expect(measureJson(['x'.repeat(100), 'y'.repeat(100)], { maxBytes: 50 })).toMatchObject({ over: 'bytes' });
  });
});

describe('valueCapError and admissionProblem', () => {
  it('names the cap and the limit of a value that is too large', () => {
    const err = valueCapError('the input', { blob: 'x'.repeat(2_000) }, 'inputBytes', { ...DEFAULT_CAPS, inputBytes: 1_000 });
    expect(err).toMatchObject({ code: 'cap_exceeded', retryable: false, details: { cap: 'inputBytes', limit: 1_000 } });
    expect(err!.message).toContain('caps.inputBytes');
  });

  it('refuses a value nested too deep as cap jsonDepth', () => {
    expect(valueCapError('x', nested(3_000), 'resultBytes', DEFAULT_CAPS)).toMatchObject({ code: 'cap_exceeded', details: { cap: 'jsonDepth' } });
  });

  it('refuses a workflow name that is too long, and accepts a normal one with a fitting input', () => {
    expect(admissionProblem('n'.repeat(8_000), {}, DEFAULT_CAPS)).toMatchObject({ code: 'invalid_name' });
    expect(admissionProblem('report', { a: 1 }, DEFAULT_CAPS)).toBeUndefined();
  });
});

describe('names and storable text', () => {
  it(`allows names up to ${MAX_NAME_BYTES} bytes of UTF-8, without control characters or lone surrogates`, () => {
    expect(nameProblem('a'.repeat(MAX_NAME_BYTES))).toBeUndefined();
    expect(nameProblem('a'.repeat(MAX_NAME_BYTES + 1))).toMatch(/at most 200 bytes/);
    expect(nameProblem('🙂'.repeat(51))).toMatch(/at most 200 bytes/);
    expect(nameProblem('a\nb')).toMatch(/control/);
    expect(nameProblem('a\ud83d')).toMatch(/surrogate/);
    expect(nameProblem('by web 🙂')).toBeUndefined();
  });

  it('replaces NUL and lone surrogates, keeps pairs, and cuts long text', () => {
    expect(storableText('a\u0000b\ud83dc🙂')).toBe('a\ufffdb\ufffdc🙂');
    expect(storableText('x'.repeat(2_000), 10)).toBe(`${'x'.repeat(10)}…`);
    expect(storableIssues(Array.from({ length: 60 }, () => ({ path: 'p', message: 'm' })))).toHaveLength(51);
  });
});

describe('the caps at validation', () => {
  it('refuses maxSteps above caps.steps at maxSteps, and lowers the default step budget to the cap', () => {
    const caps = { ...DEFAULT_CAPS, steps: 20 };
    expect(validateFlow({ maxSteps: 1_000_000, start: 'a', steps: { a: noop() } }, { caps })).toEqual([
      { path: 'maxSteps', message: "maxSteps 1000000 is above the operator's cap caps.steps (20)" },
    ]);
    expect(compiled({ start: 'a', steps: { a: noop() } }, caps).maxSteps).toBe(20);
    expect(compileFlow({ maxSteps: 1_000_000, start: 'a', steps: { a: noop() } }).ok).toBe(true);
  });

  it('refuses a forEach concurrency above the cap at its path, and lowers an omitted one to the cap', () => {
    const caps = { ...DEFAULT_CAPS, forEachConcurrency: 4 };
    expect(validateFlow(forEachFlow({ concurrency: 50 }), { caps })).toEqual([
      { path: 'steps.each.forEach.concurrency', message: "concurrency 50 is above the operator's cap caps.forEachConcurrency (4)" },
    ]);
    const t = compiled(forEachFlow({}), caps).steps.get('each')!.transition;
    expect(t).toMatchObject({ kind: 'forEach', concurrency: 4 });
  });

  it('refuses literal forEach items above caps.forEachItems', () => {
    const issues = validateFlow(forEachFlow({ items: [1, 2, 3] }), { caps: { ...DEFAULT_CAPS, forEachItems: 2 } });
    expect(issues).toEqual([{ path: 'steps.each.forEach.items', message: "3 items are above the operator's cap caps.forEachItems (2)" }]);
  });
});

describe('the caps at run time', () => {
  const scope = (extra: Record<string, unknown>) => ({ steps: {}, workflow: { id: '1', name: 't' }, ...extra });

  it('a forEach over more items than caps.forEachItems fails with cap_exceeded naming the cap', () => {
    const flow = compiled(forEachFlow({}), { ...DEFAULT_CAPS, forEachItems: 3 });
    const d = resolveSuccess(flow, 'each', scope({ input: { items: [1, 2, 3, 4] }, result: null }));
    expect(d).toMatchObject({ kind: 'failBranch', error: { code: 'cap_exceeded', step: 'each', details: { cap: 'forEachItems', limit: 3, actual: 4 } } });
    expect(resolveSuccess(flow, 'each', scope({ input: { items: [1, 2, 3] }, result: null }))).toMatchObject({ kind: 'forEach' });
  });

  it('an output above caps.outputBytes fails the workflow with cap_exceeded', () => {
    const flow = compiled({ start: 'a', steps: { a: noop({ done: true, output: '{{result}}' }) } }, { ...DEFAULT_CAPS, outputBytes: 100 });
    const d = resolveSuccess(flow, 'a', scope({ input: {}, result: { blob: 'x'.repeat(200) } }));
    expect(d).toMatchObject({ kind: 'failBranch', error: { code: 'cap_exceeded', details: { cap: 'outputBytes' } } });
    expect(resolveSuccess(flow, 'a', scope({ input: {}, result: { ok: 1 } }))).toEqual({ kind: 'complete', output: { ok: 1 } });
  });
});

describe('odd flows get issues, never exceptions', () => {
  it('a flow nested 3,000 deep is refused with the path where it passes the depth limit', () => {
    const issues = validateFlow({ start: 'a', steps: { a: noop({ args: { x: nested(3_000) } }) } });
    expect(issues).toHaveLength(1);
    expect(issues[0]!.message).toBe(`flow nests deeper than ${MAX_JSON_DEPTH} levels`);
    expect(issues[0]!.path).toMatch(/^steps\.a\.args\.x(\[0\])+$/);
  });

  it('a flow given as JSON text holding an object is read and compiled', () => {
    expect(compileFlow(JSON.stringify({ start: 'a', steps: { a: noop() } })).ok).toBe(true);
  });

  it('a string starting with an emoji is not JSON: one issue, storable once cleaned', () => {
    const issues = validateFlow('🙂{"start":"a"}');
    expect(issues).toHaveLength(1);
    expect(issues[0]!.message).toMatch(/it is a string, not a flow/);
    expect(storableIssues(issues)[0]!.message).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });

  it('a step name longer than 200 bytes is reported at its key', () => {
    const long = 's'.repeat(8_000);
    const issues = validateFlow({ start: long, steps: { [long]: noop() } });
    expect(issues.length).toBeGreaterThan(0);
    expect(issues.every((i) => /at most 200 bytes/.test(i.message))).toBe(true);
  });
});
