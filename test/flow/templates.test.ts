import { describe, it, expect } from 'vitest';
import { parseTemplateExpression, resolveTemplates, templateRefs, type TemplateScope } from '../../src/flow/templates.js';
import { TemplateError } from '../../src/errors.js';

const scope = (): TemplateScope => ({
  input: { topic: 'cats', n: 3, ok: true, none: null, tags: ['a', 'b'], nested: { deep: { x: 1 } }, 'a b': 'spaced', years: { '2024': 'leap' } },
  steps: {
    search: { status: 'done', error: null, result: { hits: [{ id: 'h1', text: 'one' }, { id: 'h2', text: 'two' }] } },
  },
  result: { count: 2 },
  item: { text: 'hello', n: 7 },
  index: 0,
  results: [1, 2],
  error: { message: 'boom', code: 'tool_error' },
  workflow: { id: '42', name: 'demo' },
});

function thrown(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TemplateError);
    return err as TemplateError;
  }
  throw new Error('expected a TemplateError');
}

describe('resolveTemplates', () => {
  it('keeps the type of a value when the string is exactly one template', () => {
    const s = scope();
    expect(resolveTemplates('{{input.n}}', s)).toBe(3);
    expect(resolveTemplates('{{input.ok}}', s)).toBe(true);
    expect(resolveTemplates('{{input.none}}', s)).toBeNull();
    expect(resolveTemplates('{{input.tags}}', s)).toEqual(['a', 'b']);
    expect(resolveTemplates('{{steps.search.result.hits[0]}}', s)).toEqual({ id: 'h1', text: 'one' });
    expect(resolveTemplates('{{index}}', s)).toBe(0);
  });

  it('allows whitespace inside the braces', () => {
    expect(resolveTemplates('{{ input.n }}', scope())).toBe(3);
    expect(resolveTemplates('{{\tinput.topic  }}', scope())).toBe('cats');
  });

  it('interpolates templates inside text: strings as they are, other values as JSON', () => {
    const s = scope();
    expect(resolveTemplates('https://example.org/q/{{input.topic}}', s)).toBe('https://example.org/q/cats');
    expect(resolveTemplates('n={{input.n}} ok={{input.ok}} none={{input.none}}', s)).toBe('n=3 ok=true none=null');
    expect(resolveTemplates('tags: {{input.tags}}', s)).toBe('tags: ["a","b"]');
    expect(resolveTemplates('{{input.topic}}{{input.n}}', s)).toBe('cats3');
    expect(resolveTemplates(' {{input.n}}', s)).toBe(' 3');
  });

  it('resolves templates in nested objects and arrays and returns new objects without changing the input', () => {
    const args = { query: '{{input.topic}}', list: ['{{input.n}}', { id: '{{steps.search.result.hits[1].id}}' }], keep: 5, flag: false, nothing: null };
    const before = structuredClone(args);
    const out = resolveTemplates(args, scope()) as Record<string, unknown>;
    expect(out).toEqual({ query: 'cats', list: [3, { id: 'h2' }], keep: 5, flag: false, nothing: null });
    expect(args).toEqual(before);
    expect(out).not.toBe(args);
    expect(out.list).not.toBe(args.list);
  });

  it('returns values that contain no templates unchanged', () => {
    expect(resolveTemplates('plain text', scope())).toBe('plain text');
    expect(resolveTemplates(12, scope())).toBe(12);
    expect(resolveTemplates(null, scope())).toBeNull();
    expect(resolveTemplates('a } b }} c', scope())).toBe('a } b }} c');
  });

  it('does not resolve templates found inside resolved values', () => {
    const s = { input: { evil: '{{workflow.id}}' }, workflow: { id: 'secret' } };
    expect(resolveTemplates('{{input.evil}}', s)).toBe('{{workflow.id}}');
    expect(resolveTemplates('x {{input.evil}}', s)).toBe('x {{workflow.id}}');
  });

  it('indexes arrays with [n] and .n, and reads quoted keys', () => {
    const s = scope();
    expect(resolveTemplates('{{steps.search.result.hits.1.text}}', s)).toBe('two');
    expect(resolveTemplates('{{input["a b"]}}', s)).toBe('spaced');
    expect(resolveTemplates("{{input['a b']}}", s)).toBe('spaced');
    expect(resolveTemplates('{{input.years.2024}}', s)).toBe('leap');
    expect(resolveTemplates('{{input["nested"]["deep"].x}}', s)).toBe(1);
    expect(resolveTemplates('{{workflow.name}}-{{workflow.id}}', s)).toBe('demo-42');
  });

  it('reads a key containing "}}" when it is quoted', () => {
    expect(resolveTemplates('{{input["a}}b"]}}', { input: { 'a}}b': 1 } })).toBe(1);
  });

  it('accepts the seed aliases workflow_input and loop_item', () => {
    const s = scope();
    expect(resolveTemplates('{{workflow_input.topic}}', s)).toBe('cats');
    expect(resolveTemplates('{{loop_item.text}}', s)).toBe('hello');
  });

  it('resolves a forEach alias passed as a root', () => {
    expect(resolveTemplates('{{doc.title}}', { doc: { title: 'T' }, item: { title: 'T' } })).toBe('T');
  });

  it('reports a missing path naming the full template and the missing segment', () => {
    const err = thrown(() => resolveTemplates('{{steps.search.result.hits[3].id}}', scope()));
    expect(err.message).toBe('template "{{steps.search.result.hits[3].id}}": "hits[3]" does not exist');
    expect(err.code).toBe('template_error');
    expect(err.retryable).toBe(false);
    expect(err.details).toMatchObject({ segment: 'hits[3]', path: ['steps', 'search', 'result', 'hits', 3] });
  });

  it('treats a missing path inside text as an error, not an empty string', () => {
    expect(() => resolveTemplates('hello {{input.nope}}!', scope())).toThrow('template "{{input.nope}}": "nope" does not exist');
  });

  it('treats indexing into null, strings and numbers as missing', () => {
    expect(() => resolveTemplates('{{input.none.x}}', scope())).toThrow('"x" does not exist');
    expect(() => resolveTemplates('{{input.topic.length}}', scope())).toThrow('"length" does not exist');
    expect(() => resolveTemplates('{{input.n[0]}}', scope())).toThrow('"n[0]" does not exist');
  });

  it('does not read array properties other than indexes', () => {
    expect(() => resolveTemplates('{{input.tags.length}}', scope())).toThrow('"length" does not exist');
    expect(() => resolveTemplates('{{input.tags["0"]}}', scope())).toThrow('does not exist');
  });

  it('treats undefined values as missing', () => {
    expect(() => resolveTemplates('{{input.u}}', { input: { u: undefined } })).toThrow('"u" does not exist');
  });

  it('rejects an unknown root', () => {
    const err = thrown(() => resolveTemplates('{{inputs.topic}}', scope()));
    expect(err.message).toContain('template "{{inputs.topic}}": unknown root "inputs"');
    expect(() => resolveTemplates('{{item}}', { input: {} })).toThrow('unknown root "item"');
  });

  it('never resolves __proto__, constructor or prototype', () => {
    const s = scope();
    for (const t of ['{{input.__proto__}}', '{{input.constructor}}', '{{input.nested.prototype}}', '{{input["__proto__"]}}', "{{input['constructor'].name}}", '{{constructor}}']) {
      expect(() => resolveTemplates(t, s), t).toThrow(TemplateError);
    }
  });

  it('resolves only own properties, never inherited ones', () => {
    const input = Object.create({ secret: 1 }) as Record<string, unknown>;
    input.visible = 2;
    expect(resolveTemplates('{{input.visible}}', { input })).toBe(2);
    expect(() => resolveTemplates('{{input.secret}}', { input })).toThrow('"secret" does not exist');
    expect(() => resolveTemplates('{{input.toString}}', { input: {} })).toThrow('"toString" does not exist');
    expect(() => resolveTemplates('{{input.hasOwnProperty}}', { input: {} })).toThrow('does not exist');
  });

  it('ignores an inherited root in the scope', () => {
    const s = Object.create({ input: { x: 1 } }) as TemplateScope;
    expect(() => resolveTemplates('{{input.x}}', s)).toThrow('unknown root "input"');
  });

  it('copies a "__proto__" key of the input as an own property without changing any prototype', () => {
    const args = JSON.parse('{"__proto__": {"polluted": "{{input.topic}}"}}') as unknown;
    const out = resolveTemplates(args, scope()) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toEqual({ polluted: 'cats' });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('rejects bad syntax with a TemplateError', () => {
    for (const t of ['{{}}', '{{   }}', '{{a..b}}', '{{input.}}', '{{input[0}}', '{{ steps.x[abc] }}', '{{input[-1]}}', '{{input["x]}}', '{{input x}}', '{{1abc}}', 'text {{input.topic']) {
      expect(() => resolveTemplates(t, scope()), t).toThrow(TemplateError);
    }
  });
});

describe('parseTemplateExpression', () => {
  it('splits an expression into root and path with numeric indexes', () => {
    expect(parseTemplateExpression('steps.search.result.hits[0].id')).toEqual({ root: 'steps', path: ['search', 'result', 'hits', 0, 'id'] });
    expect(parseTemplateExpression(' input.list.2["a b"][\'c\'] ')).toEqual({ root: 'input', path: ['list', 2, 'a b', 'c'] });
    expect(parseTemplateExpression('steps.by-web.result')).toEqual({ root: 'steps', path: ['by-web', 'result'] });
    expect(parseTemplateExpression('result')).toEqual({ root: 'result', path: [] });
  });

  it('normalizes the seed aliases', () => {
    expect(parseTemplateExpression('workflow_input.x')).toEqual({ root: 'input', path: ['x'] });
    expect(parseTemplateExpression('loop_item')).toEqual({ root: 'item', path: [] });
  });

  it('names the problem in syntax errors', () => {
    expect(() => parseTemplateExpression('')).toThrow('empty');
    expect(() => parseTemplateExpression('a..b')).toThrow('empty path segment');
    expect(() => parseTemplateExpression('a[1')).toThrow('unclosed "["');
    expect(() => parseTemplateExpression('steps.x[abc]')).toThrow('"[abc]" is not an index');
    expect(() => parseTemplateExpression('a["x')).toThrow('unclosed quoted key');
  });
});

describe('templateRefs', () => {
  it('lists every template in a JSON value with aliases normalized', () => {
    const refs = templateRefs({
      a: '{{ workflow_input.topic }}',
      b: ['x {{steps.search.result.hits[0].id}} y {{loop_item}}', 3, null],
      c: { d: 'no templates' },
    });
    expect(refs).toEqual([
      { raw: '{{ workflow_input.topic }}', root: 'input', path: ['topic'] },
      { raw: '{{steps.search.result.hits[0].id}}', root: 'steps', path: ['search', 'result', 'hits', 0, 'id'] },
      { raw: '{{loop_item}}', root: 'item', path: [] },
    ]);
  });

  it('throws a TemplateError on bad syntax', () => {
    expect(() => templateRefs({ a: ['{{a..b}}'] })).toThrow(TemplateError);
  });

  it('returns nothing for values without templates', () => {
    expect(templateRefs({ a: 1, b: [true, 'x'] })).toEqual([]);
  });
});

describe('resolution speed', () => {
  it('resolves a long string with many templates in linear time', () => {
    const text = '{{input.topic}} '.repeat(20_000);
    const started = performance.now();
    const out = resolveTemplates(text, scope()) as string;
    expect(out.length).toBe('cats '.length * 20_000);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('fails fast on a long unclosed template', () => {
    const text = `{{${'a'.repeat(100_000)}`;
    const started = performance.now();
    expect(() => resolveTemplates(text, scope())).toThrow('no closing "}}"');
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
