import { describe, expect, it } from 'vitest';
import { FAILED_STEPS, resolveTemplates, type TemplateScope } from '../../src/flow/templates.js';

const scopeWith = (extra: Partial<TemplateScope> = {}, failed?: string[]): TemplateScope => {
  const scope: TemplateScope = { input: {}, steps: { ok: { result: { v: 1 } } }, ...extra };
  if (failed) (scope as { [FAILED_STEPS]?: ReadonlySet<string> })[FAILED_STEPS] = new Set(failed);
  return scope;
};

describe('a template naming a step with no result', () => {
  it('says the step failed and has no result when the scope lists it as failed', () => {
    expect(() => resolveTemplates('{{steps.elicit.result}}', scopeWith({}, ['elicit']))).toThrow(
      'template "{{steps.elicit.result}}": step "elicit" failed and has no result',
    );
  });

  it('says the step failed, and where its error is, in the step its onError routed to', () => {
    const scope = scopeWith({ error: { code: 'tool_error', message: 'declined', step: 'elicit' } });
    expect(() => resolveTemplates({ a: 'got {{steps.elicit.result.answer}}' }, scope)).toThrow(
      'step "elicit" failed and has no result (its error is {{error}})',
    );
  });

  it('says no attempt of the step has completed in the workflow yet when it did not fail', () => {
    let err: unknown;
    try {
      resolveTemplates('{{steps.later.result}}', scopeWith({}, ['elicit']));
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toBe('template "{{steps.later.result}}": step "later" has no result: no attempt of it has completed in this workflow yet');
    expect(err).toMatchObject({ code: 'template_error', retryable: false });
  });

  it('still says "does not exist" for a missing path below a step that has a result', () => {
    expect(() => resolveTemplates('{{steps.ok.result.w}}', scopeWith({}, ['ok']))).toThrow('"w" does not exist');
  });

  it('never exposes the failed-steps marker as a root or in a resolved value', () => {
    const scope = scopeWith({}, ['elicit']);
    expect(Object.keys(scope)).toEqual(['input', 'steps']);
    expect(() => resolveTemplates('{{nope}}', scope)).toThrow('available here: input, steps)');
  });
});
