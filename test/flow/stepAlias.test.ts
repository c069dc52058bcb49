import { describe, expect, it } from 'vitest';
import { parseTemplateExpression, resolveTemplates, templateRefs } from '../../src/flow/templates.js';
import { validateFlow } from '../../src/flow/validate.js';

describe('{{step.NAME.path}}, the seed 000 alias of {{steps.NAME.result.path}}', () => {
  const scope = { steps: { search: { result: { hits: [{ id: 7 }] } } } };

  it('parses and resolves to the step result', () => {
    expect(parseTemplateExpression('step.search.hits[0].id')).toEqual({ root: 'steps', path: ['search', 'result', 'hits', 0, 'id'] });
    expect(resolveTemplates('{{step.search.hits[0].id}}', scope)).toBe(7);
    expect(resolveTemplates('{{ step.search }}', scope)).toEqual({ hits: [{ id: 7 }] });
    expect(resolveTemplates('id {{step.search.hits.0.id}}', scope)).toBe('id 7');
    expect(templateRefs('{{step.search.hits}}')).toEqual([{ raw: '{{step.search.hits}}', root: 'steps', path: ['search', 'result', 'hits'] }]);
  });

  it('says which part is missing, and validation checks the step exists', () => {
    expect(() => resolveTemplates('{{step.search.nope}}', scope)).toThrow('"nope" does not exist');
    expect(() => resolveTemplates('{{step.other.x}}', scope)).toThrow('step "other" has no result: no attempt of it has completed');
    const flow = (args: unknown) => ({ start: 'a', steps: { a: { tool: 'core.echo', next: 'b' }, b: { tool: 'core.echo', args } } });
    expect(validateFlow(flow({ x: '{{step.a.value}}' }))).toEqual([]);
    expect(validateFlow(flow({ x: '{{step.zz.value}}' }))).toEqual([{ path: 'steps.b.args', message: 'template refers to step "zz", which does not exist' }]);
  });
});

describe('a forEach alias named "step"', () => {
  it('is refused: it would shadow the step alias', () => {
    const flow = { start: 'each', steps: { each: { forEach: { items: [1], step: 'do', as: 'step' } }, do: { tool: 'core.echo' } } };
    expect(validateFlow(flow)).toEqual([{ path: 'steps.each.forEach.as', message: 'forEach alias "step" shadows a built-in template root' }]);
  });
});
