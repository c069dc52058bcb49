/** Fork options (DESIGN §2d) as validation sees them, and the pure join verdict. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';
import { resolveSuccess } from '../../src/flow/transitions.js';
import { joinVerdict, type ForkCounts } from '../../src/flow/joinPolicy.js';
import { compileCondition } from '../../src/flow/conditions.js';
import type { ForkPolicy } from '../../src/flow/compiled.js';

const fork = (extra: Record<string, unknown>, branches: unknown = ['a', 'b']) => ({
  start: 'f',
  steps: { f: { parallel: branches, join: 'j', ...extra }, a: { tool: 'core.noop' }, b: { tool: 'core.noop' }, j: { tool: 'core.noop' } },
});

function messages(raw: unknown): string[] {
  return validateFlow(raw).map((i) => `${i.path}: ${i.message}`);
}

describe('validation of fork options', () => {
  it('accepts every completion policy, cancelRemaining and concurrency on parallel', () => {
    for (const complete of ['all', 'first', { atLeast: 2 }, { when: 'completed >= 1 && results.a != null' }]) {
      expect(messages(fork({ complete, ...(complete === 'all' ? {} : { cancelRemaining: false }), concurrency: 1 }))).toEqual([]);
    }
    expect(messages(fork({}, [{ if: 'input.x > 1', then: 'a' }, 'b']))).toEqual([]);
  });

  it('says what a templated fork list should be', () => {
    const m = messages(fork({}, '{{input.branches}}'));
    expect(m).toHaveLength(1);
    expect(m[0]).toMatch(/^steps\.f\.parallel: parallel lists the branches by name and cannot be a template .*forEach/);
    expect(messages(fork({}, ['a', '{{input.b}}']))[0]).toMatch(/steps\.f\.parallel\[1\]: a parallel branch is a step name, not a template/);
    const each = messages({ start: 'e', steps: { e: { forEach: '{{input.items}}', join: 'j' }, j: { tool: 'core.noop' } } });
    expect(each).toEqual(['steps.e.forEach: forEach is an object naming the items and the step to run for each: { "items": "{{input.items}}", "step": "NAME" }']);
  });

  it('refuses bad entries, policies and numbers with messages that say what is expected', () => {
    expect(messages(fork({}, [{ if: 'x', then: 'a', else: 'b' }]))[0]).toMatch(/parallel\[0\]: each parallel branch is a step name or \{"if"/);
    expect(messages(fork({}, [{ if: 'nope ==', then: 'a' }]))[0]).toMatch(/^steps\.f\.parallel\[0\]\.if: condition "nope ==" does not parse/);
    expect(messages(fork({}, [{ if: 'true', then: 'zz' }]))[0]).toMatch(/parallel\[0\]\.then: step "zz" does not exist/);
    expect(messages(fork({ complete: 'some' }))[0]).toMatch(/complete must be "all", "first", \{"atLeast": N\} or \{"when": CONDITION\}/);
    expect(messages(fork({ complete: { atLeast: 0 } }))[0]).toMatch(/complete\.atLeast must be a whole number/);
    expect(messages(fork({ complete: { atLeast: 3 } }))[0]).toMatch(/complete\.atLeast is 3, but the fork has only 2 branches/);
    expect(messages(fork({ complete: { when: 'completed >' } }))[0]).toMatch(/steps\.f\.complete\.when: condition .* does not parse/);
    expect(messages(fork({ cancelRemaining: true }))[0]).toMatch(/"cancelRemaining" goes with "complete"/);
    expect(messages(fork({ concurrency: 0 }))[0]).toMatch(/concurrency must be a whole number from 1 to 10000/);
  });

  it('names the mix-up between a fork\'s concurrency (a number) and keyed concurrency (an object)', () => {
    expect(messages(fork({ concurrency: { key: '{{input.account}}', limit: 2 } }))[0]).toMatch(
      /steps\.f\.concurrency: on a fork step "concurrency" is a number, the branches live at once .*\{"key", "limit"\} is keyed concurrency/,
    );
    const onTool = { start: 't', steps: { t: { tool: 'core.noop', concurrency: 3 } } };
    expect(messages(onTool)[0]).toMatch(/steps\.t\.concurrency: on a tool step concurrency is .*a number only applies to a fork step/);
    const onForEach = { start: 'e', steps: { e: { forEach: { items: [1], step: 'w' }, concurrency: 2 }, w: { tool: 'core.noop' } } };
    expect(messages(onForEach)[0]).toMatch(/a forEach is paced by "forEach": \{ "concurrency": N \}/);
  });

  it('refuses complete and cancelRemaining outside a fork', () => {
    const m = messages({ start: 't', steps: { t: { tool: 'core.noop', complete: 'first', cancelRemaining: false } } });
    expect(m).toEqual(expect.arrayContaining([expect.stringMatching(/"complete" only applies/), expect.stringMatching(/"cancelRemaining" only applies/)]));
  });

  it('compiles first as atLeast 1, cancelling by default; all never cancels', () => {
    const c = compileFlow(fork({ complete: 'first' }));
    if (!c.ok) throw new Error(JSON.stringify(c.issues));
    expect(c.flow.steps.get('f')!.transition).toMatchObject({ policy: { complete: { kind: 'atLeast', n: 1 }, cancelRemaining: true } });
    const all = compileFlow(fork({}));
    if (!all.ok) throw new Error('invalid');
    expect(all.flow.steps.get('f')!.transition).toMatchObject({ policy: { complete: { kind: 'all' }, cancelRemaining: false } });
  });

  it('starts only the branches whose condition holds, in listed order', () => {
    const c = compileFlow(fork({ concurrency: 1 }, [{ if: 'input.n > 1', then: 'a' }, { if: 'result.ok', then: 'b' }]));
    if (!c.ok) throw new Error(JSON.stringify(c.issues));
    const at = (input: unknown, result: unknown) => resolveSuccess(c.flow, 'f', { input, result, steps: {} });
    expect(at({ n: 2 }, { ok: true })).toEqual({ kind: 'parallel', branches: ['a', 'b'], concurrency: 1 });
    expect(at({ n: 0 }, { ok: true })).toEqual({ kind: 'parallel', branches: ['b'], concurrency: 1 });
    expect(at({ n: 0 }, { ok: false })).toEqual({ kind: 'parallel', branches: [], concurrency: 1 });
  });
});

describe('conditional entries, any mix', () => {
  it('start exactly the branches whose condition holds, in listed order, plain names always', () => {
    fc.assert(fc.property(fc.array(fc.constantFrom<'plain' | 'yes' | 'no'>('plain', 'yes', 'no'), { minLength: 1, maxLength: 8 }), (kinds) => {
      const names = kinds.map((_, i) => `b${i}`);
      const entries = kinds.map((k, i) => (k === 'plain' ? names[i] : { if: k === 'yes' ? 'input.on' : '!input.on', then: names[i] }));
      const steps: Record<string, unknown> = { f: { parallel: entries, join: 'j' }, j: { tool: 'core.noop' } };
      for (const n of names) steps[n] = { tool: 'core.noop' };
      const c = compileFlow({ start: 'f', steps });
      if (!c.ok) throw new Error(JSON.stringify(c.issues));
      const d = resolveSuccess(c.flow, 'f', { input: { on: true }, result: null, steps: {} });
      expect(d).toEqual({ kind: 'parallel', branches: names.filter((_, i) => kinds[i] !== 'no') });
    }), { numRuns: 50 });
  });
});

describe('joinVerdict', () => {
  const none = () => ({});
  const atLeast = (n: number, cancelRemaining = true): ForkPolicy => ({ complete: { kind: 'atLeast', n }, cancelRemaining });
  /** Any consistent counts: completed ≤ finished ≤ total. */
  const counts = fc
    .tuple(fc.nat(50), fc.nat(50), fc.nat(50))
    .map(([a, b, c]) => [a, b, c].sort((x, y) => x - y))
    .map(([completed, finished, total]): ForkCounts => ({ completed: completed!, finished: finished!, total: total! }));

  it('all: joins exactly when every branch finished', () => {
    fc.assert(fc.property(counts, (c) => {
      const v = joinVerdict({ complete: { kind: 'all' }, cancelRemaining: false }, c, none, 'f');
      expect(v.kind).toBe(c.finished >= c.total ? 'join' : 'wait');
    }));
  });

  it('atLeast N: joins once N completed, fails once N cannot be reached, else waits', () => {
    fc.assert(fc.property(counts, fc.integer({ min: 1, max: 60 }), (c, n) => {
      const v = joinVerdict(atLeast(n), c, none, 'f');
      const possible = c.completed + (c.total - c.finished);
      expect(v.kind).toBe(c.completed >= n ? 'join' : possible < n ? 'unreachable' : 'wait');
      if (v.kind === 'unreachable') expect(v.error).toMatchObject({ code: 'join_unreachable', step: 'f', retryable: false });
    }));
  });

  it('never waits once every branch finished (no fork stalls)', () => {
    fc.assert(fc.property(counts, fc.integer({ min: 1, max: 60 }), fc.boolean(), (c, n, holds) => {
      const done = { ...c, finished: c.total };
      const when: ForkPolicy = { complete: { kind: 'when', condition: compileCondition(holds ? 'true' : 'false') }, cancelRemaining: true };
      for (const p of [atLeast(n), when]) expect(joinVerdict(p, done, none, 'f').kind).not.toBe('wait');
    }));
  });

  it('when: evaluates the condition over results and completed', () => {
    const when: ForkPolicy = { complete: { kind: 'when', condition: compileCondition('completed >= 2 || results.a == "x"', ['results', 'completed']) }, cancelRemaining: true };
    const c = { completed: 1, finished: 1, total: 3 };
    expect(joinVerdict(when, c, () => ({ results: { a: 'x' }, completed: 1 }), 'f').kind).toBe('join');
    expect(joinVerdict(when, c, () => ({ results: { a: 'y' }, completed: 1 }), 'f').kind).toBe('wait');
    expect(joinVerdict(when, { ...c, finished: 3 }, () => ({ results: { a: 'y' }, completed: 1 }), 'f').kind).toBe('unreachable');
  });
});

describe('safeVerdict', () => {
  it('turns a complete.when that cannot be evaluated into a failure of the fork', async () => {
    const { safeVerdict } = await import('../../src/flow/joinPolicy.js');
    const when: ForkPolicy = { complete: { kind: 'when', condition: compileCondition('results.missing.deeper == 1', ['results', 'completed']) }, cancelRemaining: true };
    const v = safeVerdict(() => joinVerdict(when, { completed: 0, finished: 0, total: 1 }, () => ({ results: {} }), 'f'), 'f');
    expect(v).toMatchObject({ kind: 'unreachable', error: { code: 'condition_error', step: 'f' } });
  });
});
