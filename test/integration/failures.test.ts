import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import type { ToolContext, ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const rowsNamed = async (t: TestSchema, id: string, name: string) => (await getSteps(t, id)).filter((s) => s.name === name);

const fastRetry = { maxAttempts: 3, initial: '10ms', max: '20ms' };

/** `test.flaky {okOnAttempt}`: fails (retryable) until the given attempt, then returns it. */
const flakyTools: ToolProvider = {
  prefix: 'test',
  async call(_tool: string, args: unknown, ctx: ToolContext) {
    const okOn = (args as { okOnAttempt: number }).okOnAttempt;
    if (ctx.attempt < okOn) throw new StepError('http_503', `attempt ${ctx.attempt} failed`, { retryable: true });
    return { attempt: ctx.attempt };
  },
  async list() {
    return [{ name: 'flaky' }];
  },
};

describe('retries', () => {
  it('retries a retryable error as new attempt rows until maxAttempts, then fails the workflow with the error', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'flaky',
      steps: { flaky: { tool: 'core.fail', args: { message: 'upstream 503', retryable: true, code: 'http_503' }, retry: fastRetry } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'http_503', message: 'upstream 503', step: 'flaky', attempt: 3 });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.attempt, s.status, s.error?.code])).toEqual([
      ['flaky', 1, 'failed', 'http_503'],
      ['flaky', 2, 'failed', 'http_503'],
      ['flaky', 3, 'failed', 'http_503'],
    ]);
    // Each retry waits its backoff: it was claimable only after the previous attempt failed.
    for (let i = 1; i < steps.length; i++) expect(steps[i]!.ready_at!.getTime()).toBeGreaterThan(steps[i - 1]!.completed_at!.getTime());
    for (const s of steps) expect(s.args).toEqual({ message: 'upstream 503', retryable: true, code: 'http_503' });
  });

  it('a later attempt that succeeds continues the flow with its result', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [flakyTools] });
    const id = await insertWorkflow(t, {
      start: 'call',
      steps: { call: { tool: 'test.flaky', args: { okOnAttempt: 2 }, retry: fastRetry, next: 'after' }, after: { tool: 'core.echo', args: { got: '{{steps.call.result}}' } } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ got: { attempt: 2 } });
    expect((await getSteps(t, id)).map((s) => [s.name, s.attempt, s.status])).toEqual([
      ['call', 1, 'failed'],
      ['call', 2, 'done'],
      ['after', 1, 'done'],
    ]);
  });

  it('a step past its timeout is aborted and fails with code timeout, which is retried', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'slow',
      steps: { slow: { tool: 'core.sleep', args: { ms: 60_000 }, timeout: '50ms', retry: { maxAttempts: 2, initial: '10ms', max: '10ms' } } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'timeout', step: 'slow', attempt: 2 });
    expect((await getSteps(t, id)).map((s) => [s.attempt, s.status, s.error?.code])).toEqual([
      [1, 'failed', 'timeout'],
      [2, 'failed', 'timeout'],
    ]);
    await waitFor(() => executor.runningCount === 0, 'no step left running');
  });

  it('does not retry a non-retryable error: exactly one attempt', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'bad',
      steps: { bad: { tool: 'core.fail', args: { message: 'bad request', retryable: false }, retry: fastRetry } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'failed', message: 'bad request', step: 'bad', retryable: false });
    expect((await getSteps(t, id)).map((s) => [s.attempt, s.status])).toEqual([[1, 'failed']]);
  });

  it('routes to onError after the last attempt with {{error.message}}, and the workflow completes', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'flaky',
      steps: {
        flaky: { tool: 'core.fail', args: { message: 'still down', retryable: true }, retry: fastRetry, onError: 'note', next: 'never' },
        never: { tool: 'core.noop' },
        note: { tool: 'core.echo', args: { noted: '{{error.message}}', code: '{{error.code}}', text: 'failed: {{error.message}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ noted: 'still down', code: 'failed', text: 'failed: still down' });
    expect((await getSteps(t, id)).map((s) => [s.name, s.attempt, s.status])).toEqual([
      ['flaky', 1, 'failed'],
      ['flaky', 2, 'failed'],
      ['flaky', 3, 'failed'],
      ['note', 1, 'done'],
    ]);
  });
});

describe('the error an onError step handles', () => {
  it('is available to the onError step\'s own branch conditions and output template, not only its args', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = (code: string) => ({
      start: 'call',
      steps: {
        call: { tool: 'core.fail', args: { message: 'it broke', code }, retry: fastRetry, onError: 'triage' },
        triage: { tool: 'core.echo', args: { seen: '{{error.code}}' }, branch: [{ if: 'error.code == "denied" && error.attempt == 1', then: 'denied' }], default: 'other' },
        denied: { tool: 'core.echo', args: { handled: '{{steps.triage.result.seen}}' } },
        other: { tool: 'core.echo', args: { v: '{{steps.call.result}}' }, onError: 'last' },
        last: { tool: 'core.noop', done: true, output: { code: '{{error.code}}', step: '{{error.step}}', why: '{{error.message}}' } },
      },
    });
    const denied = await insertWorkflow(t, flow('denied'));
    const other = await insertWorkflow(t, flow('boom'));
    const wf = await waitForWorkflow(t, denied);
    expect(wf.error).toBeNull();
    expect(wf.output).toEqual({ handled: 'denied' });
    // "call" never succeeded, so other's args fail with template_error, routed to "last".
    const wf2 = await waitForWorkflow(t, other);
    expect(wf2.error).toBeNull();
    expect(wf2.output).toMatchObject({ code: 'template_error', step: 'other' });
  });

  it('is the gate rejection for an onError step reached from a rejected gate', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'gate',
      steps: {
        gate: { approval: true, onError: 'refused', next: 'go' },
        go: { tool: 'core.noop' },
        refused: { tool: 'core.noop', done: true, output: '{{error.details.reason}}' },
      },
    });
    const gate = await waitForStep(t, id, 'gate', 'pending');
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false, "reason": "too costly"}' WHERE id = $1`, [gate.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toBe('too costly');
  });
});

describe('outcomes PostgreSQL cannot store', () => {
  it('fails the step with invalid_result (not retried) when a tool returns a string with a NUL character', async () => {
    const t = await createTestSchema();
    const nul: ToolProvider = {
      prefix: 'test',
      call: async () => ({ text: 'a\u0000b' }),
      list: async () => [{ name: 'nul' }],
    };
    await startExecutor(t, { tools: [nul] });
    const id = await insertWorkflow(t, {
      start: 'call',
      steps: { call: { tool: 'test.nul', retry: fastRetry, onError: 'handle' }, handle: { tool: 'core.echo', args: { code: '{{error.code}}' } } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ code: 'invalid_result' });
    expect((await getSteps(t, id)).map((s) => [s.name, s.attempt, s.status])).toEqual([
      ['call', 1, 'failed'],
      ['handle', 1, 'done'],
    ]);
  });
});

describe('template errors', () => {
  it('fails a step whose args name a missing input path with template_error, once, and fails the workflow', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'first',
      steps: {
        first: { tool: 'core.echo', args: { ok: 1 }, next: 'use' },
        use: { tool: 'core.echo', args: { v: '{{input.missing.deep}}' }, retry: fastRetry },
      },
    }, { present: 1 });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'template_error', step: 'use' });
    const use = await rowsNamed(t, id, 'use');
    expect(use).toHaveLength(1);
    expect(use[0]).toMatchObject({ status: 'failed', attempt: 1, error: { code: 'template_error', retryable: false } });
  });

  it('routes a template error to onError', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'use',
      steps: {
        use: { tool: 'core.echo', args: { v: '{{input.missing}}' }, onError: 'fallback' },
        fallback: { tool: 'core.echo', args: { code: '{{error.code}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ code: 'template_error' });
  });
});

describe('fan-out failure modes', () => {
  it('allSettled: a failing branch does not fail the workflow and the join sees {status: failed, error}', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['good', 'bad'], join: 'merge', mode: 'allSettled' },
        good: { tool: 'core.echo', args: { v: 1 } },
        bad: { tool: 'core.fail', args: { message: 'nope', code: 'broken' } },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const r = (wf.output as { r: Record<string, { status: string; result?: unknown; error?: { code: string; message: string } }> }).r;
    expect(r.good).toEqual({ status: 'done', result: { v: 1 } });
    expect(r.bad).toMatchObject({ status: 'failed', error: { code: 'broken', message: 'nope' } });
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(1);
  });

  it('allSettled forEach: every item runs and the join sees each outcome in input order', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'work', concurrency: 1 }, join: 'merge', mode: 'allSettled' },
        work: { tool: 'core.echo', args: { v: '{{item}}' }, branch: [{ if: 'result.v == "x"', then: 'boom' }], default: 'fine' },
        boom: { tool: 'core.fail', args: { message: 'bad item' } },
        fine: { tool: 'core.echo', args: { ok: '{{item}}' } },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { list: ['a', 'x', 'b'] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const r = (wf.output as { r: { status: string; result?: unknown }[] }).r;
    expect(r.map((o) => o.status)).toEqual(['done', 'failed', 'done']);
    expect(r[0]!.result).toEqual({ ok: 'a' });
    expect(r[2]!.result).toEqual({ ok: 'b' });
  });

  it('a branch whose step fails over to onError keeps the fan-out going; the join sees the onError result', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['good', 'bad'], join: 'merge' },
        good: { tool: 'core.echo', args: { v: 1 } },
        bad: { tool: 'core.fail', args: { message: 'nope' }, onError: 'recover' },
        recover: { tool: 'core.echo', args: { recovered: '{{error.message}}' } },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: { good: { v: 1 }, bad: { recovered: 'nope' } } });
  });

  it('the join waits for a branch that is being retried and sees its successful attempt', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [flakyTools] });
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['quick', 'flaky'], join: 'merge' },
        quick: { tool: 'core.echo', args: { v: 1 } },
        flaky: { tool: 'test.flaky', args: { okOnAttempt: 3 }, retry: fastRetry },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: { quick: { v: 1 }, flaky: { attempt: 3 } } });
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(1);
    expect((await rowsNamed(t, id, 'flaky')).map((s) => s.status)).toEqual(['failed', 'failed', 'done']);
  });

  it('failFast (default): a branch that fails for good fails the workflow and cancels a running sibling', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['slow', 'gate'], join: 'merge' },
        slow: { tool: 'core.sleep', args: { ms: 60_000 } },
        gate: { approval: true, next: 'bad' },
        bad: { tool: 'core.fail', args: { message: 'fatal', code: 'fatal' } },
        merge: { tool: 'core.noop' },
      },
    });
    await waitForStep(t, id, 'slow', 'running');
    await waitFor(() => executor.runningCount === 1, 'the sleep to be running in the executor');
    const gate = await waitForStep(t, id, 'gate', 'pending');
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'fatal', step: 'bad' });
    expect((await rowsNamed(t, id, 'slow'))[0]!.status).toBe('cancelled');
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(0);
    await waitFor(() => executor.runningCount === 0, 'the aborted sleep to leave the executor');
    // The aborted tool's late outcome did not overwrite the cancelled row.
    expect((await rowsNamed(t, id, 'slow'))[0]).toMatchObject({ status: 'cancelled', result: null });
  });
});
