import { describe, expect, it } from 'vitest';
import { compileCondition } from '../../src/flow/conditions.js';
import { CONDITION_BUDGET, MAX_COMPREHENSION_NESTING } from '../../src/flow/celBudget.js';
import { BudgetError, TEMPLATE_BUDGET_CHARS } from '../../src/flow/caps.js';
import { resolveTemplates } from '../../src/flow/templates.js';
import { ConditionError, StepError } from '../../src/errors.js';

const TEN = '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]';

/** `levels` nested `.all` comprehensions over `list`. */
function nestedAll(list: string, levels: number): string {
  let expr = 'true';
  for (let i = levels - 1; i >= 0; i--) expr = `${list}.all(v${i}, ${expr})`;
  return expr;
}

function thrown(fn: () => unknown): StepError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(StepError);
    return err as StepError;
  }
  throw new Error('expected a StepError');
}

describe('conditions that obviously exceed the budget are refused when compiled', () => {
  it('refuses the eight-level comprehension bomb, naming the budget', () => {
    const err = thrown(() => compileCondition(nestedAll(TEN, 8)));
    expect(err).toBeInstanceOf(ConditionError);
    expect(err.message).toMatch(/budget/);
    expect(err.message).toMatch(/nest 8 deep/);
  });

  it(`refuses comprehensions nested ${MAX_COMPREHENSION_NESTING + 1} deep even over lists only known at run time`, () => {
    expect(thrown(() => compileCondition(nestedAll('input.l', MAX_COMPREHENSION_NESTING + 1))).message).toMatch(/budget/);
  });

  it(`accepts ${MAX_COMPREHENSION_NESTING} levels over small lists and evaluates them`, () => {
    const c = compileCondition(nestedAll('input.l', MAX_COMPREHENSION_NESTING));
    expect(c.evaluate({ input: { l: [1, 2, 3] } })).toBe(true);
  });

  it('refuses nested comprehensions whose literal lists multiply past the budget', () => {
    const big = `[${Array.from({ length: 1_000 }, (_, i) => i).join(',')}]`;
    expect(thrown(() => compileCondition(`${big}.all(a, ${big}.all(b, a != b || a == b))`)).message).toMatch(/over the evaluation budget/);
  });

  it('a map literal within the size the parser allows still compiles', () => {
    expect(compileCondition('{"a": 1, "b": 2}.all(k, k != "")').evaluate({})).toBe(true);
  });
});

describe('evaluation stops at the budget with budget_exceeded', () => {
  const input = { l: Array.from({ length: 100 }, (_, i) => i) };

  it('three comprehensions over a 100-element input (10^6 iterations) fail, non-retryable', () => {
    const err = thrown(() => compileCondition(nestedAll('input.l', 3)).evaluate({ input }));
    expect(err).toBeInstanceOf(BudgetError);
    expect(err.code).toBe('budget_exceeded');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain(String(CONDITION_BUDGET));
  });

  it('an exhausted budget is not hidden by `|| true`', () => {
    expect(thrown(() => compileCondition(`${nestedAll('input.l', 3)} || true`).evaluate({ input })).code).toBe('budget_exceeded');
  });

  it('doubling a string with cel.bind stops before it grows large', () => {
    const c = compileCondition('cel.bind(a, input.s + input.s, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, size(d) > 0))))');
    expect(thrown(() => c.evaluate({ input: { s: 'x'.repeat(500_000) } })).code).toBe('budget_exceeded');
    expect(c.evaluate({ input: { s: 'xy' } })).toBe(true);
  });

  it('the budget is per evaluation: a condition near it passes again and again', () => {
    const c = compileCondition('input.l.exists(x, x == 99_999)'.replace('_', ''));
    const big = { l: Array.from({ length: 90_000 }, (_, i) => i) };
    for (let i = 0; i < 3; i++) expect(c.evaluate({ input: big })).toBe(false);
  });

  it('ordinary conditions are unaffected', () => {
    const c = compileCondition('size(result.hits) > 0 && result.hits.exists(h, h.score > 0.5)');
    expect(c.evaluate({ result: { hits: [{ score: 0.2 }, { score: 0.9 }] } })).toBe(true);
  });
});

describe('template resolution runs under a budget of characters produced', () => {
  const big = { text: 'x'.repeat(1024 * 1024) };

  it('substituting a large value a few times is fine', () => {
    const out = resolveTemplates({ a: '{{steps.s.result}}', b: 'copy: {{steps.s.result.text}}' }, { steps: { s: { result: big } } }) as Record<string, unknown>;
    expect(out.a).toBe(big);
    expect((out.b as string).length).toBe(big.text.length + 6);
  });

  it('repeating a large value past the budget fails with budget_exceeded naming the template', () => {
    const copies = Math.ceil(TEMPLATE_BUDGET_CHARS / big.text.length) + 1;
    const args = Object.fromEntries(Array.from({ length: copies }, (_, i) => [`k${i}`, '{{steps.s.result}}']));
    const err = thrown(() => resolveTemplates(args, { steps: { s: { result: big } } }));
    expect(err.code).toBe('budget_exceeded');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('{{steps.s.result}}');
  });
});

describe('regular expressions run in linear time (RE2)', () => {
  it('matches a catastrophic-backtracking pattern against a long input without hanging', () => {
    // With JavaScript's RegExp this takes 2^40 steps; RE2 answers at once.
    const c = compileCondition('input.s.matches("^(a+)+$")');
    expect(c.evaluate({ input: { s: `${'a'.repeat(40)}!` } })).toBe(false);
    expect(c.evaluate({ input: { s: 'aaaa' } })).toBe(true);
  });

  it('keeps CEL semantics: a match anywhere in the string counts', () => {
    expect(compileCondition('"hello world".matches("o w")').evaluate({})).toBe(true);
    expect(compileCondition('input.s.matches("^[0-9]+$")').evaluate({ input: { s: '12a' } })).toBe(false);
  });

  it('refuses a pattern RE2 cannot run (a backreference) with a condition error', () => {
    const err = thrown(() => compileCondition('input.s.matches("(a)\\\\1")').evaluate({ input: { s: 'aa' } }));
    expect(err).toBeInstanceOf(ConditionError);
    expect(err.message).toMatch(/invalid regular expression/);
  });
});
