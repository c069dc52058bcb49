/**
 * Every CEL operator is charged to the evaluation budget in proportion to what it walks or builds
 * (celBudget.ts): membership, comparisons of lists, maps and strings, string functions, `+` of
 * strings and lists, and comprehensions whose nested costs multiply. Small values stay free or
 * cheap, so ordinary conditions are unaffected. Pure: no database.
 */
import { describe, expect, it } from 'vitest';
import { CONDITION_BUDGET, deepCost } from '../../src/flow/celBudget.js';
import { BudgetError, DEFAULT_CAPS } from '../../src/flow/caps.js';
import { compileCondition } from '../../src/flow/conditions.js';
import { compileFlow, MAX_FLOW_CONDITION_CHARS } from '../../src/flow/validate.js';

const ints = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
const A = ints(4_000);
const B = ints(100_000, 1_000_000);
const BIG_TEXT = 'x'.repeat(1 << 20);

function budgetError(condition: string, input: unknown): BudgetError {
  const c = compileCondition(condition);
  try {
    c.evaluate({ input });
  } catch (err) {
    expect(err).toBeInstanceOf(BudgetError);
    expect((err as BudgetError).code).toBe('budget_exceeded');
    expect((err as BudgetError).message).toContain(`evaluation budget of ${CONDITION_BUDGET}`);
    return err as BudgetError;
  }
  throw new Error(`expected ${condition} to exceed the budget`);
}

describe('operators that walk a value are charged its size', () => {
  it.each([
    { name: 'membership `in` a list (the review: 4,000 x 100,000)', condition: 'input.a.exists(x, x in input.b)', input: { a: A, b: B } },
    { name: '`in` a list of lists (deep equality per element)', condition: 'input.a.exists(x, [x] in input.b)', input: { a: A, b: ints(30_000, 1_000_000).map((i) => [i]) } },
    { name: '== of two lists in all', condition: 'input.a.all(x, input.b == input.c)', input: { a: A, b: B, c: [...B] } },
    { name: '!= of two lists', condition: 'input.a.all(x, input.b != input.c)', input: { a: A, b: B.slice(0, 50), c: B.slice(0, 50).concat([0]) } },
    { name: '== of two maps', condition: 'input.a.all(x, input.m == input.n)', input: { a: A, m: Object.fromEntries(ints(5_000).map((i) => [`k${i}`, i])), n: Object.fromEntries(ints(5_000).map((i) => [`k${i}`, i])) } },
    { name: '== of long strings', condition: 'input.a.all(x, input.s == input.t)', input: { a: A, s: BIG_TEXT, t: `${BIG_TEXT}` } },
    { name: '< of long strings', condition: 'input.a.all(x, input.s < input.t + "")', input: { a: A, s: BIG_TEXT, t: BIG_TEXT } },
  ])('$name exceeds the budget', ({ condition, input }) => {
    budgetError(condition, input);
  });
});

describe('string functions and built values are charged their length', () => {
  it.each([
    { name: 'contains', condition: 'input.a.exists(x, input.s.contains("zz"))' },
    { name: 'startsWith', condition: 'input.a.exists(x, input.s.startsWith("zz"))' },
    { name: 'endsWith', condition: 'input.a.exists(x, input.s.endsWith("zz"))' },
    { name: 'matches', condition: 'input.a.exists(x, input.s.matches("zz"))' },
    { name: 'size of a string', condition: 'input.a.exists(x, size(input.s) == 1)' },
    { name: '+ of strings in map', condition: 'size(input.a.map(x, input.s + "y")) > 0' },
  ])('$name over a 1 MiB string in a comprehension exceeds the budget', ({ condition }) => {
    budgetError(condition, { a: A, s: BIG_TEXT });
  });

  it('list concatenation is charged before it copies (a comprehension swallowing the error does not copy again)', () => {
    budgetError('input.a.exists(x, size(input.b + input.b) == 1)', { a: A, b: B });
  });

  it('nested comprehensions multiply: 4,000 x 4,000 exists', () => {
    budgetError('input.a.exists(x, input.a.exists(y, x == y + 100000))', { a: A });
  });
});

describe('ordinary conditions stay within the budget', () => {
  it('comparing scalars costs nothing beyond the comprehension step', () => {
    const c = compileCondition('input.l.exists(x, x == -1)');
    expect(c.evaluate({ input: { l: ints(90_000) } })).toBe(false);
  });

  it('a map lookup and the size of a large list are constant time', () => {
    const c = compileCondition('"k1" in input.m && size(input.l) == 100000 && input.l[5] == 1000005');
    expect(c.evaluate({ input: { m: Object.fromEntries(ints(50_000).map((i) => [`k${i}`, i])), l: B } })).toBe(true);
  });

  it('membership in a small list, equality of small lists and string functions on short text pass', () => {
    const c = compileCondition('input.a.all(x, x in [0, 1, 2, 3] || input.tags == ["a", "b"]) && input.s.startsWith("he") && input.s.contains("ll")');
    expect(c.evaluate({ input: { a: ints(1_000).map((i) => i % 4), tags: ['a', 'b'], s: 'hello' } })).toBe(true);
  });
});

describe('deepCost', () => {
  it('counts elements and entries at every depth and 1 per 16 characters, and stops past its limit', () => {
    expect(deepCost([1, [2, 3], { a: 'x'.repeat(32) }], 1_000)).toBe(3 + 2 + 1 + 2);
    expect(deepCost(ints(1_000_000), 10)).toBeGreaterThan(10);
    expect(deepCost(42, 10)).toBe(0);
  });
});

/** `n` chained steps, each branching on a condition when `withConditions`. */
function chainFlow(n: number, casesPerStep = 0): unknown {
  const steps: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const next = i + 1 < n ? `s${i + 1}` : undefined;
    if (next && casesPerStep > 0) steps[`s${i}`] = { tool: 'core.noop', branch: Array.from({ length: casesPerStep }, (_, k) => ({ if: `result.v == ${k}`, then: next })), default: next };
    else steps[`s${i}`] = next ? { tool: 'core.noop', next } : { tool: 'core.noop', done: true };
  }
  return { start: 's0', steps };
}

describe('compiling a flow is bounded before it starts', () => {
  const caps = DEFAULT_CAPS;

  it(`a flow of ${DEFAULT_CAPS.flowSteps} steps, each with a condition, compiles; one more step is refused naming caps.flowSteps`, () => {
    expect(compileFlow(chainFlow(caps.flowSteps, 1), { caps }).ok).toBe(true);
    const over = compileFlow(chainFlow(caps.flowSteps + 1), { caps });
    expect(over.ok).toBe(false);
    expect(over.issues).toEqual([{ path: 'steps', message: expect.stringContaining(`${caps.flowSteps + 1} steps, above the operator's cap caps.flowSteps (${caps.flowSteps})`) }]);
  });

  it('the 10,000-step flow of the review is refused by counting, before any step is parsed', () => {
    const flow = chainFlow(10_000) as { steps: Record<string, unknown> };
    flow.steps.s5 = { tool: 42 }; // shape errors further in are never reached
    expect(compileFlow(flow, { caps }).issues).toEqual([{ path: 'steps', message: expect.stringContaining('10000 steps') }]);
  });

  it('branch conditions count against caps.flowSteps too, and their text against a fixed limit', () => {
    const manyCases = compileFlow(chainFlow(200, 12), { caps });
    expect(manyCases.issues[0]?.message).toMatch(/2388 branch conditions, above the operator's cap caps.flowSteps/);
    const long = `result.v == 1 && ${Array.from({ length: 60 }, (_, k) => `result.w${k} == ${k}`).join(' && ')}`;
    const steps: Record<string, unknown> = { end: { tool: 'core.noop', done: true } };
    for (let i = 0; i < 160; i++) steps[`s${i}`] = { tool: 'core.noop', branch: [{ if: long, then: 'end' }], default: 'end' };
    const flow = { start: 's0', steps };
    expect(compileFlow(flow, { caps }).issues[0]?.message).toContain(`above the limit of ${MAX_FLOW_CONDITION_CHARS}`);
  });

  it('without caps (a local `stepd run`), only the fixed limits apply', () => {
    expect(compileFlow(chainFlow(caps.flowSteps + 1)).ok).toBe(true);
  });
});
