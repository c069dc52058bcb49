/**
 * Redrive at the edges: a settled allSettled fan-out keeps its outcomes, a cap raised by the
 * operator lets a failed transition go on, two executors handle one request once, and a
 * workflow cancelled while its redrive waited stays cancelled.
 */
import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, getWorkflow, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

/** `test.work {key}`: fails (not retryable) while `key` is broken; counts calls per key. */
function board(): { tool: ToolProvider; broken: Set<string>; calls: Map<string, number> } {
  const broken = new Set<string>();
  const calls = new Map<string, number>();
  const tool: ToolProvider = {
    prefix: 'test',
    async call(_tool, args) {
      const key = String((args as { key: unknown }).key);
      calls.set(key, (calls.get(key) ?? 0) + 1);
      if (broken.has(key)) throw new StepError('broken', `${key} is broken`, { retryable: false });
      return { done: key };
    },
    async list() {
      return [{ name: 'work' }];
    },
  };
  return { tool, broken, calls };
}

const redrive = (t: TestSchema, id: string) => t.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed' RETURNING id`, [id]);

describe('redrive at the edges', () => {
  it('an allSettled fan-out that settled keeps its outcomes: only the failed join runs again', async () => {
    const t = await createTestSchema();
    const b = board();
    b.broken.add('b').add('join');
    await startExecutor(t, { tools: [b.tool] });
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: ['a', 'b', 'c'], step: 'w' }, mode: 'allSettled', join: 'j' },
        w: { tool: 'test.work', args: { key: '{{item}}' }, retry: { maxAttempts: 1 } },
        j: { tool: 'test.work', args: { key: 'join', seen: '{{results}}' }, retry: { maxAttempts: 1 }, done: true, output: '{{steps.each.result}}' },
      },
    });
    const failed = await waitForWorkflow(t, id);
    expect(failed.error).toMatchObject({ code: 'broken', step: 'j' });
    b.broken.clear();
    await redrive(t, id);
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps.filter((s) => s.name === 'j').map((s) => [s.attempt, s.status])).toEqual([
      [1, 'failed'],
      [2, 'done'],
    ]);
    // The item that failed inside the settled fan-out did not run again: its outcome was the join's input.
    expect(b.calls.get('b')).toBe(1);
    expect(steps.filter((s) => s.name === 'w')).toHaveLength(3);
    expect(steps.find((s) => s.name === 'j' && s.attempt === 2)!.args).toMatchObject({ seen: [{ status: 'done' }, { status: 'failed' }, { status: 'done' }] });
  });

  it('a forEach over the cap fails; after the operator raises the cap a redrive fans out and completes', async () => {
    const t = await createTestSchema();
    const b = board();
    const first = await startExecutor(t, { tools: [b.tool], caps: { forEachItems: 3 } });
    const id = await insertWorkflow(t, {
      start: 'list',
      steps: {
        list: { tool: 'core.echo', args: { xs: [1, 2, 3, 4, 5] }, next: 'each' },
        each: { forEach: { items: '{{steps.list.result.xs}}', step: 'w' }, join: 'sum' },
        w: { tool: 'test.work', args: { key: 'item{{item}}' } },
        sum: { tool: 'core.echo', args: { all: '{{results}}' }, done: true, output: '{{result.all}}' },
      },
    });
    expect((await waitForWorkflow(t, id)).error).toMatchObject({ code: 'cap_exceeded', step: 'each' });
    await first.stop({ graceMs: 0 });
    await startExecutor(t, { tools: [b.tool], caps: { forEachItems: 10 } });
    await redrive(t, id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual([1, 2, 3, 4, 5].map((i) => ({ done: `item${i}` })));
    const steps = await getSteps(t, id);
    // list kept its one row; the fork is recorded again with its items.
    expect(steps.filter((s) => s.name === 'list')).toHaveLength(1);
    expect(steps.filter((s) => s.name === 'sum')).toHaveLength(1);
  });

  it('an output over the cap fails the workflow; after the cap is raised a redrive completes it with that output', async () => {
    const t = await createTestSchema();
    const first = await startExecutor(t, { caps: { outputBytes: 64 } });
    const id = await insertWorkflow(t, { start: 'big', steps: { big: { tool: 'core.echo', args: { text: 'x'.repeat(200) } } } });
    expect((await waitForWorkflow(t, id)).error).toMatchObject({ code: 'cap_exceeded', details: { cap: 'outputBytes' } });
    await first.stop({ graceMs: 0 });
    await startExecutor(t, { caps: { outputBytes: 4096 } });
    await redrive(t, id);
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { text: 'x'.repeat(200) }, redrives: 1 });
    expect(await getSteps(t, id)).toHaveLength(1);
  });

  it('with two executors a request is handled once', async () => {
    const t = await createTestSchema();
    const b = board();
    b.broken.add('k');
    await startExecutor(t, { tools: [b.tool] });
    await startExecutor(t, { tools: [b.tool] });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await insertWorkflow(t, { start: 's', steps: { s: { tool: 'test.work', args: { key: 'k' }, retry: { maxAttempts: 1 } } } }));
    for (const id of ids) await waitForWorkflow(t, id);
    b.broken.clear();
    for (const id of ids) await redrive(t, id);
    for (const id of ids) {
      expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', redrives: 1 });
      expect((await getSteps(t, id)).map((s) => s.attempt)).toEqual([1, 2]);
    }
  });

  it('a workflow cancelled while its redrive waited stays cancelled and its request is dropped', async () => {
    const t = await createTestSchema();
    const b = board();
    b.broken.add('k');
    const first = await startExecutor(t, { tools: [b.tool] });
    const id = await insertWorkflow(t, { start: 's', steps: { s: { tool: 'test.work', args: { key: 'k' }, retry: { maxAttempts: 1 } } } });
    await waitForWorkflow(t, id);
    await first.stop({ graceMs: 0 });
    await redrive(t, id);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    await startExecutor(t, { tools: [b.tool] });
    const wf = await waitFor(async () => {
      const row = await getWorkflow(t, id);
      return row.redrive_requested_at === null ? row : undefined;
    }, 'the request to be dropped');
    expect(wf).toMatchObject({ status: 'cancelled', redrives: 0 });
    expect(await getSteps(t, id)).toHaveLength(1);
  });
});
