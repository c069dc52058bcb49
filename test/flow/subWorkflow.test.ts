import { describe, expect, it } from 'vitest';
import { compileFlow, validateFlow } from '../../src/flow/validate.js';
import { settledOutcome, subWorkflowRequest } from '../../src/flow/subWorkflow.js';
import { getStep } from '../../src/flow/compiled.js';

const flow = (steps: Record<string, unknown>) => ({ start: Object.keys(steps)[0], steps });

describe('sub-workflow steps in a flow', () => {
  it('compile as kind workflow with their name, version and input template', () => {
    const c = compileFlow(flow({ sub: { workflow: { name: 'child', version: 2, input: { x: '{{input.x}}' } }, retry: { maxAttempts: 2 }, onError: 'h' }, h: { tool: 'core.noop' } }));
    expect(c.ok).toBe(true);
    if (!c.ok) return;
    const sub = getStep(c.flow, 'sub');
    expect(sub).toMatchObject({ kind: 'workflow', tool: null, workflow: { name: 'child', version: 2, input: { x: '{{input.x}}' } }, onError: 'h' });
    expect(sub.retry.maxAttempts).toBe(2);
  });

  it('may be the step of a forEach and read the item', () => {
    const c = compileFlow(flow({ each: { forEach: { items: '{{input.items}}', step: 'one' } }, one: { workflow: { name: 'child', input: { id: '{{item.id}}' } } } }));
    expect(c.ok).toBe(true);
    if (c.ok) expect(getStep(c.flow, 'one').usesItem).toBe(true);
  });

  it('refuse what a sub-workflow step cannot also be, each with its path', () => {
    const issues = validateFlow(
      flow({
        a: { workflow: { name: 'c' }, tool: 'core.noop', next: 'b' },
        b: { workflow: { name: 'c' }, approval: true, next: 'c' },
        c: { workflow: { name: 'c' }, wait: '1s', next: 'd' },
        d: { workflow: { name: 'c' }, timeout: '5s', next: 'e' },
        e: { workflow: { name: 'c', input: [1] }, next: 'f' },
        f: { workflow: { name: 'c', input: { x: '{{nowhere.x}}' } }, next: 'g' },
        g: { workflow: { name: 'c' }, parallel: ['a'] },
      }),
    );
    const paths = issues.map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining(['steps.a.workflow', 'steps.b.approval', 'steps.c.wait', 'steps.d.timeout', 'steps.e.workflow.input', 'steps.f.workflow.input', 'steps.g.workflow']),
    );
  });

  it('refuse a workflow without a name or with a bad version', () => {
    const paths = validateFlow(flow({ a: { workflow: { name: '', version: 0 } } })).map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['steps.a.workflow.name', 'steps.a.workflow.version']));
  });
});

describe('the request and the outcome of a sub-workflow step', () => {
  const compiled = compileFlow(flow({ sub: { workflow: { name: 'child', input: '{{input.order}}' } } }));
  const step = compiled.ok ? getStep(compiled.flow, 'sub') : undefined;

  it('records the input resolved, and refuses an input that is not an object', () => {
    expect(subWorkflowRequest(step!, { input: { order: { id: 7 } } } as never)).toEqual({ workflow: 'child', version: null, input: { id: 7 } });
    expect(() => subWorkflowRequest(step!, { input: { order: [1] } } as never)).toThrow(/must resolve to an object/);
  });

  it("takes a completed child's output as the result and its failure as the error, retryable as the child's was", () => {
    expect(settledOutcome({ workflowId: '9', status: 'completed', output: { a: 1 } })).toEqual({ status: 'done', result: { a: 1 } });
    expect(settledOutcome({ workflowId: '9', status: 'completed' })).toEqual({ status: 'done', result: null });
    const failed = settledOutcome({ workflowId: '9', status: 'failed', error: { code: 'upstream', message: 'down', retryable: true, step: 'call' } });
    expect(failed).toEqual({
      status: 'failed',
      error: { code: 'upstream', message: 'sub-workflow 9 failed: down', retryable: true, details: { workflowId: '9', step: 'call' } },
    });
    const invalid = settledOutcome({ workflowId: '9', status: 'failed', error: { code: 'invalid_flow', message: 'bad', issues: [{ path: 'x', message: 'y' }] } });
    expect(invalid).toMatchObject({ status: 'failed', error: { code: 'invalid_flow', retryable: false, issues: [{ path: 'x', message: 'y' }] } });
    expect(settledOutcome({ workflowId: '9', status: 'cancelled' })).toMatchObject({ status: 'failed', error: { code: 'cancelled', retryable: false } });
  });
});
