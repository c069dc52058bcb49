import { describe, expect, it } from 'vitest';
import { formatPath, normalizeFlow, parseFlowShape } from '../../src/flow/spec.js';

describe("reading the seed's flat form", () => {
  it('moves the start step under its name and the other keys under steps', () => {
    const flat = {
      start: { name: 'search', tool: 'kb.search', args: { query: '{{input.topic}}' }, next: 'summarize' },
      summarize: { name: 'summarize', tool: 'kb.get', args: { id: '{{input.doc_id}}' }, next: 'notify' },
      notify: { name: 'notify', tool: 'core.echo', args: { message: 'done' }, done: true },
    };
    const { flow, issues } = normalizeFlow(flat);
    expect(issues).toEqual([]);
    expect(flow).toEqual({
      start: 'search',
      steps: {
        search: flat.start,
        summarize: flat.summarize,
        notify: flat.notify,
      },
    });
  });

  it('leaves the canonical form as it is', () => {
    const canonical = { start: 'a', steps: { a: { tool: 'core.noop' } } };
    expect(normalizeFlow(canonical)).toEqual({ flow: canonical, issues: [] });
  });

  it('parses a flow given as JSON text', () => {
    const { spec, issues } = parseFlowShape(JSON.stringify({ start: { name: 'a', tool: 'core.noop', done: true } }));
    expect(issues).toEqual([]);
    expect(spec?.start).toBe('a');
    expect(spec?.steps.a).toMatchObject({ name: 'a', tool: 'core.noop', done: true });
  });

  it('keeps the seed approval gate (tool null, empty args) as a step without a tool', () => {
    const { spec } = parseFlowShape({
      start: { name: 'request_approval', tool: null, args: {}, next: 'execute_write' },
      execute_write: { name: 'execute_write', tool: 'core.echo', args: {}, done: true },
    });
    expect(spec?.steps.request_approval).toEqual({ name: 'request_approval', tool: null, args: {}, next: 'execute_write' });
  });

  it('reports a flat start step without a name at start.name', () => {
    expect(normalizeFlow({ start: { tool: 'core.noop' }, other: { tool: 'core.noop' } }).issues).toEqual([
      { path: 'start.name', message: expect.stringContaining('"name"') },
    ]);
  });

  it('reports a step defined both as start and under its own key', () => {
    const { issues } = normalizeFlow({ start: { name: 'a', tool: 'core.noop' }, a: { tool: 'core.echo' } });
    expect(issues).toEqual([{ path: 'a', message: expect.stringContaining('defined twice') }]);
  });
});

describe('flow shape errors', () => {
  it.each([
    ['a JSON array', [1, 2]],
    ['a string that is not JSON', '{"start": '],
    ['null', null],
    ['a number', 42],
  ])('rejects %s at the root with a readable message', (_label, raw) => {
    const { spec, issues } = parseFlowShape(raw);
    expect(spec).toBeUndefined();
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ path: '' });
    expect(issues[0]!.message).toMatch(/JSON object|not valid JSON/);
  });

  it('points each zod issue at the offending key', () => {
    const { issues } = parseFlowShape({
      start: 'a',
      steps: {
        a: { tool: 'core.noop', nxt: 'b' },
        b: { tool: 5, branch: [{ if: 'result == true' }] },
        c: { retry: { maxAttempts: 0 } },
      },
    });
    const paths = issues.map((i) => i.path).sort();
    expect(paths).toEqual(['steps.a', 'steps.b.branch[0].then', 'steps.b.tool', 'steps.c.retry.maxAttempts']);
    for (const i of issues) expect(i.message.length).toBeGreaterThan(0);
  });

  it('requires start and steps in the canonical form', () => {
    const paths = parseFlowShape({ steps: {} }).issues.map((i) => i.path);
    expect(paths).toEqual(['start']);
    expect(parseFlowShape({ start: 'a' }).issues.map((i) => i.path)).toEqual(['steps']);
  });

  it('refuses __proto__ as a step name in either form', () => {
    expect(parseFlowShape(JSON.parse('{"start":"__proto__","steps":{"__proto__":{"tool":"core.noop"}}}')).issues).toEqual([
      { path: 'steps.__proto__', message: '"__proto__" cannot name a step' },
    ]);
    expect(parseFlowShape({ start: { name: '__proto__', tool: 'core.noop' } }).issues).toEqual([
      { path: 'start.name', message: '"__proto__" cannot name a step' },
    ]);
    expect(parseFlowShape({ start: 'a', steps: { a: { tool: 'core.noop', next: '__proto__' } } }).issues).toEqual([
      { path: 'steps.a.next', message: '"__proto__" cannot name a step' },
    ]);
  });

  it('rejects unknown top-level keys', () => {
    const { issues } = parseFlowShape({ start: 'a', steps: { a: { tool: 'core.noop' } }, extra: 1 });
    expect(issues).toEqual([{ path: '', message: expect.stringContaining('extra') }]);
  });
});

describe('formatPath', () => {
  it('joins names with dots and indexes with brackets', () => {
    expect(formatPath(['steps', 'search', 'branch', 0, 'if'])).toBe('steps.search.branch[0].if');
    expect(formatPath([])).toBe('');
  });
});
