import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import type { ToolContext, ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';

/** A tool that fails its first call retryably and records the context of every call. */
function flakyRecorder(): ToolProvider & { calls: ToolContext[] } {
  const calls: ToolContext[] = [];
  return {
    prefix: 'flaky',
    calls,
    async call(_tool, args, ctx) {
      calls.push(ctx);
      if (ctx.attempt === 1) throw new StepError('flaky', 'first attempt fails', { retryable: true });
      return args;
    },
    async list() {
      return [{ name: 'once' }];
    },
  };
}

describe('idempotency keys', () => {
  it('gives every attempt of one step the same key, and each step its own', async () => {
    const t = await createTestSchema();
    const tool = flakyRecorder();
    await startExecutor(t, { tools: [tool] });
    const retry = { maxAttempts: 3, initial: '10ms', max: '20ms' };
    const id = await insertWorkflow(t, {
      start: 'a',
      steps: { a: { tool: 'flaky.once', args: { n: 1 }, retry, next: 'b' }, b: { tool: 'flaky.once', args: { n: 2 }, retry } },
    });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.attempt, s.status])).toEqual([
      ['a', 1, 'failed'],
      ['a', 2, 'done'],
      ['b', 1, 'failed'],
      ['b', 2, 'done'],
    ]);
    const keys = tool.calls.map((c) => `${c.stepName}#${c.attempt} ${c.idempotencyKey}`);
    const keyOf = (name: string, attempt: number) => tool.calls.find((c) => c.stepName === name && c.attempt === attempt)!.idempotencyKey;
    expect(keyOf('a', 2), keys.join('\n')).toBe(keyOf('a', 1));
    expect(keyOf('b', 2)).toBe(keyOf('b', 1));
    expect(keyOf('a', 1)).not.toBe(keyOf('b', 1));
    expect(steps[1]!.first_attempt_id).toBe(steps[0]!.id);
  });
});
