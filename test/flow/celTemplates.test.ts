/** `{{= CEL }}`: computed values in templates, under the CEL budget. */
import { describe, expect, it } from 'vitest';
import { resolveTemplates, templateRefs } from '../../src/flow/templates.js';
import { validateFlow } from '../../src/flow/validate.js';
import { resolveWaitMs } from '../../src/flow/waitDuration.js';

const scope = { input: { n: 2, price: 1.5, tags: ['a', 'b'] }, steps: { s: { result: { hits: [1, 2, 3] } } }, workflow: { id: '7', name: 'w' } };

describe('{{= expression }}', () => {
  it('computes a typed value when the string is one template', () => {
    expect(resolveTemplates('{{= input.n + 1 }}', scope)).toBe(3);
    expect(resolveTemplates('{{= input.price * 2 }}', scope)).toBe(3);
    expect(resolveTemplates('{{= size(steps.s.result.hits) > 2 }}', scope)).toBe(true);
    expect(resolveTemplates('{{= input.tags.map(t, t + "!") }}', scope)).toEqual(['a!', 'b!']);
    expect(resolveTemplates({ q: '{{=input.n * 10}}', m: "{{= {'k': input.n} }}" }, scope)).toEqual({ q: 20, m: { k: 2 } });
  });

  it('interpolates inside text, beside path templates', () => {
    expect(resolveTemplates('page {{= input.n + 1 }} of {{workflow.name}}', scope)).toBe('page 3 of w');
  });

  it('fails with a template error naming the template when it cannot be evaluated', () => {
    expect(() => resolveTemplates('{{= input.missing + 1 }}', scope)).toThrow(/template "\{\{= input\.missing \+ 1 \}\}"/);
    expect(() => resolveTemplates('{{= nope + 1 }}', scope)).toThrow(/template "\{\{= nope \+ 1 \}\}"/);
    expect(() => resolveTemplates('{{= }}', scope)).toThrow();
  });

  it('runs under the CEL budget', () => {
    const runaway = '{{= [1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, input.tags.map(d, d + d + d)))) }}';
    expect(() => resolveTemplates(runaway, { input: { tags: Array.from({ length: 200 }, () => 'x'.repeat(100)) } })).toThrow(/budget/);
  });

  it('reports the roots and steps it reads, for validation', () => {
    expect(templateRefs('{{= input.n + size(steps.s.result.hits) }}').map((r) => [r.root, r.path])).toEqual([
      ['input', []],
      ['steps', ['s']],
    ]);
  });

  it('is validated like any template: unknown roots and steps are refused before the flow runs', () => {
    const flow = (args: unknown) => ({ start: 'a', steps: { a: { tool: 'core.echo', args } } });
    expect(validateFlow(flow({ v: '{{= input.n + 1 }}' }))).toEqual([]);
    expect(validateFlow(flow({ v: '{{= foo + 1 }}' }))[0]!.message).toMatch(/unknown template root "foo"/);
    expect(validateFlow(flow({ v: '{{= steps.ghost.result }}' }))[0]!.message).toMatch(/step "ghost", which does not exist/);
    expect(validateFlow(flow({ v: '{{= input.n + }}' }))[0]!.message).toMatch(/expression .* does not parse/);
  });
});

describe('a templated wait', () => {
  it('accepts milliseconds or a duration text, computed or looked up', () => {
    expect(resolveWaitMs('t', '{{= input.n * 1000 }}', scope)).toBe(2000);
    expect(resolveWaitMs('t', '{{input.d}}', { input: { d: '90s' } })).toBe(90_000);
    expect(() => resolveWaitMs('t', '{{input.d}}', { input: { d: 'soon' } })).toThrow(/wait of step "t" is not a duration/);
    expect(() => resolveWaitMs('t', '{{= 0 - 5 }}', scope)).toThrow(/wait of step "t"/);
  });

  it('validates a templated wait by its references', () => {
    const flow = (wait: unknown) => ({ start: 't', steps: { t: { wait } } });
    expect(validateFlow(flow('{{= input.minutes * 60000 }}'))).toEqual([]);
    expect(validateFlow(flow('{{= bogus }}'))[0]).toMatchObject({ path: 'steps.t.wait', message: expect.stringMatching(/unknown template root "bogus"/) });
  });
});
