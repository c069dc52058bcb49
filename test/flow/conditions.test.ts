import { describe, it, expect } from 'vitest';
import { compileCondition, conditionRefs } from '../../src/flow/conditions.js';
import { ConditionError } from '../../src/errors.js';

const evalWith = (source: string, result: unknown): boolean => compileCondition(source).evaluate({ result });

function thrown(fn: () => unknown): ConditionError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConditionError);
    return err as ConditionError;
  }
  throw new Error('expected a ConditionError');
}

describe('the seed six forms keep their original meaning', () => {
  const values: [string, unknown][] = [
    ['true', true], ['"true"', 'true'], ['false', false], ['"false"', 'false'], ['null', null], ['undefined', undefined],
    ['""', ''], ['"nil"', 'nil'], ['"approved"', 'approved'], ['0', 0], ['{}', {}], ['"other"', 'other'],
  ];
  const table: Record<string, Record<string, boolean>> = {
    'result == true': { true: true, '"true"': true },
    'result == false': { false: true, '"false"': true },
    'result == nil': { null: true, undefined: true, '""': true, '"nil"': true },
    'result != nil': { true: true, '"true"': true, false: true, '"false"': true, '"approved"': true, 0: true, '{}': true, '"other"': true },
    'result == approved': { '"approved"': true },
    'result != approved': { true: true, '"true"': true, false: true, '"false"': true, null: true, undefined: true, '""': true, '"nil"': true, 0: true, '{}': true, '"other"': true },
  };
  for (const [source, truths] of Object.entries(table)) {
    it(`evaluates "${source}" by the seed's truth table`, () => {
      for (const [label, value] of values) {
        expect(evalWith(source, value), `${source} with result = ${label}`).toBe(truths[label] ?? false);
      }
    });
  }

  it('tolerates extra whitespace in the seed forms', () => {
    expect(evalWith('  result==true ', 'true')).toBe(true);
    expect(evalWith('result  !=  nil', 'nil')).toBe(false);
  });

  it('compares a bare word as a string, never as a number or variable', () => {
    expect(evalWith('result == ok', 'ok')).toBe(true);
    expect(evalWith('result == ok', { ok: true })).toBe(false);
    expect(evalWith('result == yes_2', 'yes_2')).toBe(true);
  });

  it('sends quoted strings, known variables, null and other shapes to CEL', () => {
    // CEL: result == "true" is a plain string comparison, result == true a bool comparison.
    expect(evalWith('result == "x"', 'x')).toBe(true);
    expect(evalWith('result.ok == true', { ok: true })).toBe(true);
    expect(evalWith('result == null', null)).toBe(true);
    expect(evalWith('result == null', '')).toBe(false); // CEL null, not the seed's nil
    expect(evalWith('result != true', 'true')).toBe(true); // not a seed form: "true" != true in CEL
    expect(compileCondition('result == input').evaluate({ result: 1, input: 1 })).toBe(true);
    expect(compileCondition('result == doc', ['doc']).evaluate({ result: 'a', doc: 'a' })).toBe(true);
  });
});

describe('CEL conditions', () => {
  it('evaluates over nested data from several roots', () => {
    const c = compileCondition('size(result.hits) > 0 && result.hits[0].score >= input.min && steps.search.status == "done"');
    expect(c.evaluate({ result: { hits: [{ score: 0.9 }] }, input: { min: 0.5 }, steps: { search: { status: 'done' } } })).toBe(true);
    expect(c.evaluate({ result: { hits: [{ score: 0.1 }] }, input: { min: 0.5 }, steps: { search: { status: 'done' } } })).toBe(false);
    expect(c.source).toBe('size(result.hits) > 0 && result.hits[0].score >= input.min && steps.search.status == "done"');
  });

  it('treats JSON numbers naturally, mixing whole numbers and fractions', () => {
    const t = (source: string, vars: Record<string, unknown>): boolean => compileCondition(source).evaluate(vars);
    expect(t('result.count > 2', { result: { count: 3 } })).toBe(true);
    expect(t('size(result.hits) == 0', { result: { hits: [] } })).toBe(true);
    expect(t('result.score >= 0.5', { result: { score: 0.5 } })).toBe(true);
    expect(t('result.score >= 0.5', { result: { score: 1 } })).toBe(true);
    expect(t('input.n == 3', { input: { n: 3 } })).toBe(true);
    expect(t('input.n == 3.0', { input: { n: 3 } })).toBe(true);
    expect(t('input.n + 1 == 4', { input: { n: 3 } })).toBe(true);
    expect(t('input.n % 2 == 1', { input: { n: 3 } })).toBe(true);
    expect(t('result.score * 2 > 1', { result: { score: 0.75 } })).toBe(true);
    expect(t('result.score + 1 == 1.5', { result: { score: 0.5 } })).toBe(true);
    expect(t('result.a + result.b == 3.5', { result: { a: 1, b: 2.5 } })).toBe(true);
    expect(t('result.a < result.b', { result: { a: 1, b: 1.5 } })).toBe(true);
    expect(t('index == 0', { index: 0 })).toBe(true);
    expect(t('item.n in [1, 2, 3]', { item: { n: 2 } })).toBe(true);
    expect(t('string(result.count) == "3"', { result: { count: 3 } })).toBe(true);
  });

  it('supports macros over lists', () => {
    const c = compileCondition('result.hits.exists(h, h.id == input.want) && result.hits.all(h, h.score > 0)');
    expect(c.evaluate({ result: { hits: [{ id: 'a', score: 1 }, { id: 'b', score: 0.2 }] }, input: { want: 'b' } })).toBe(true);
    expect(c.evaluate({ result: { hits: [{ id: 'a', score: 1 }] }, input: { want: 'b' } })).toBe(false);
  });

  it('uses has() for optional fields instead of failing', () => {
    const c = compileCondition('has(result.next) && result.next != ""');
    expect(c.evaluate({ result: {} })).toBe(false);
    expect(c.evaluate({ result: { next: 'x' } })).toBe(true);
  });

  it('binds variables missing from vars to null', () => {
    expect(compileCondition('item == null && error == null').evaluate({})).toBe(true);
    expect(compileCondition('error != null && error.code == "timeout"').evaluate({ error: { code: 'timeout' } })).toBe(true);
    expect(compileCondition('result == null').evaluate({ result: undefined })).toBe(true);
  });

  it('accepts forEach aliases as extra roots', () => {
    expect(compileCondition('doc.size > 10', ['doc']).evaluate({ doc: { size: 11 } })).toBe(true);
    expect(compileCondition('doc == null', ['doc']).evaluate({})).toBe(true);
  });

  it('evaluates many times from one compilation', () => {
    const c = compileCondition('result.n > 5');
    expect([1, 6, 5, 7].map((n) => c.evaluate({ result: { n } }))).toEqual([false, true, false, true]);
  });

  it('reads only own properties of the values', () => {
    const result = Object.create({ secret: 1 }) as Record<string, unknown>;
    result.visible = 2;
    const c = compileCondition('has(result.secret)');
    expect(c.evaluate({ result })).toBe(false);
    expect(() => compileCondition('result.secret == 1').evaluate({ result })).toThrow(ConditionError);
    expect(() => compileCondition('result.constructor != null').evaluate({ result: {} })).toThrow(ConditionError);
    expect(() => compileCondition('result.__proto__ != null').evaluate({ result: {} })).toThrow(ConditionError);
  });
});

describe('condition errors', () => {
  it('rejects a condition that does not parse, naming the source', () => {
    const err = thrown(() => compileCondition('result.count >'));
    expect(err.message).toContain('condition "result.count >" does not parse');
    expect(err.code).toBe('condition_error');
    expect(err.retryable).toBe(false);
    expect(() => compileCondition('')).toThrow(ConditionError);
    expect(() => compileCondition('"unterminated')).toThrow(ConditionError);
  });

  it('rejects unknown variables when compiling, naming them', () => {
    const err = thrown(() => compileCondition('foo == 1'));
    expect(err.message).toContain('foo');
    expect(err.message).toContain('condition "foo == 1"');
    expect(() => compileCondition('result.ok || bar.baz')).toThrow('bar');
    expect(() => compileCondition('[1, 2].exists(x, y > 1)')).toThrow('y');
    expect(() => compileCondition('doc.size > 1')).toThrow('doc');
  });

  it('rejects a condition whose type can never be a boolean when compiling', () => {
    expect(() => compileCondition('1 + 2')).toThrow('must evaluate to a boolean, got int');
    expect(() => compileCondition('"text"')).toThrow('must evaluate to a boolean');
    expect(() => compileCondition('result.ok ? 1 : "x"')).toThrow(ConditionError);
  });

  it('rejects a non-boolean result when evaluating', () => {
    const c = compileCondition('result.count');
    expect(() => c.evaluate({ result: { count: 3 } })).toThrow('condition must evaluate to a boolean, got int 3');
    expect(() => compileCondition('result').evaluate({ result: 'yes' })).toThrow('got string "yes"');
    expect(() => compileCondition('result').evaluate({ result: null })).toThrow('got null');
    expect(compileCondition('result').evaluate({ result: true })).toBe(true);
  });

  it('turns evaluation errors into ConditionError', () => {
    const err = thrown(() => compileCondition('result.missing == 1').evaluate({ result: {} }));
    expect(err.message).toContain('condition "result.missing == 1" failed: No such key: missing');
    expect(() => compileCondition('result.items[5] == 1').evaluate({ result: { items: [] } })).toThrow(ConditionError);
    expect(() => compileCondition('result.name + 1 == 2').evaluate({ result: { name: 'x' } })).toThrow(ConditionError);
    expect(() => compileCondition('result.x == 1').evaluate({ result: null })).toThrow(ConditionError);
  });

  it('rejects an extra root that cannot be a variable name', () => {
    expect(() => compileCondition('true', ['not valid'])).toThrow(ConditionError);
    expect(() => compileCondition('true', ['null'])).toThrow(ConditionError);
  });
});

describe('conditionRefs', () => {
  it('lists the top-level identifiers a condition reads', () => {
    expect(conditionRefs('size(result.hits) == 0 && steps.a.result.ok').sort()).toEqual(['result', 'steps']);
    expect(conditionRefs('input.xs.exists(x, x > index)').sort()).toEqual(['index', 'input']);
    expect(conditionRefs('cel.bind(t, input.a, t > item)').sort()).toEqual(['input', 'item']);
  });

  it('reports only result for the seed forms', () => {
    expect(conditionRefs('result == approved')).toEqual(['result']);
    expect(conditionRefs('result != nil')).toEqual(['result']);
  });

  it('reports unknown identifiers too, so a validator can name them', () => {
    expect(conditionRefs('foo == 1')).toEqual(['foo']);
  });

  it('throws a ConditionError when the condition does not parse', () => {
    expect(() => conditionRefs('a ==')).toThrow(ConditionError);
  });
});
