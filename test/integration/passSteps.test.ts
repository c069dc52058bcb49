/** A step with no tool and no approval (steps form) moves on at once; with done: failed it ends the workflow. */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';

describe('pass steps', () => {
  it('a step with done: {status: failed, error: {code, message}} and no approval fails the workflow instead of waiting', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'check',
      steps: {
        check: { tool: 'core.echo', args: { left: 0 }, branch: [{ if: 'result.left == 0', then: 'stop' }], default: 'go' },
        stop: { done: { status: 'failed', error: { code: 'over_budget', message: 'no budget left' } } },
        go: { tool: 'core.noop' },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'over_budget', message: 'no budget left', step: 'stop' });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status])).toEqual([['check', 'done'], ['stop', 'done']]);
    expect(steps.some((s) => s.status === 'pending')).toBe(false);
  });

  it('a step with only next routes on at once, and one with done: true completes with its output', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'route',
      steps: { route: { next: 'work' }, work: { tool: 'core.echo', args: { n: 1 }, next: 'end' }, end: { done: true, output: { n: '{{steps.work.result.n}}' } } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { n: 1 } });
    expect((await getSteps(t, id)).map((s) => [s.name, s.status, s.tool])).toEqual([['route', 'done', null], ['work', 'done', 'core.echo'], ['end', 'done', null]]);
  });
});
