/**
 * Redrive through the SQL contract (`UPDATE workflows SET status = 'running' WHERE id = $1 AND
 * status = 'failed'`): after the cause of a failure is fixed the failed steps get new attempts,
 * done steps keep their results, fan-outs re-run only their failed items and join once, and a
 * redrive is refused with the reason when it cannot go on.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import { HttpToolProvider } from '../../src/tools/httpTool.js';
import type { ToolContext, ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, getWorkflow, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

/** `test.work {key}`: fails (not retryable) while `key` is broken, else returns `{done: key}`; counts calls per key. */
class Switchboard implements ToolProvider {
  readonly prefix = 'test';
  readonly broken = new Set<string>();
  readonly calls = new Map<string, number>();

  async call(_tool: string, args: unknown, _ctx: ToolContext): Promise<unknown> {
    const key = String((args as { key: unknown }).key);
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
    if (this.broken.has(key)) throw new StepError('broken', `${key} is broken`, { retryable: false });
    return { done: key };
  }

  async list() {
    return [{ name: 'work' }];
  }
}

const redrive = (t: TestSchema, id: string) => t.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed' RETURNING id`, [id]);

describe('redrive', () => {
  it('re-runs the failed step once its cause is fixed: a server that answered 404 now serves the file', async () => {
    const t = await createTestSchema();
    let ready = false;
    let hits = 0;
    const server = createServer((_req, res) => {
      hits++;
      res.writeHead(ready ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ready ? { report: 'quarterly', pages: 12 } : { error: 'not found' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    onCleanup(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/report.json`;
    await startExecutor(t, { tools: [new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow: ['http://127.0.0.1:*'] } }) })] });
    const id = await insertWorkflow(t, {
      start: 'first',
      steps: {
        first: { tool: 'core.echo', args: { n: 1 }, next: 'fetch' },
        fetch: { tool: 'http.request', args: { url: '{{input.url}}' }, next: 'use' },
        use: { tool: 'core.echo', args: { pages: '{{steps.fetch.result.body.pages}}', n: '{{steps.first.result.n}}' }, done: true, output: '{{result}}' },
      },
    }, { url });
    const failed = await waitForWorkflow(t, id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'http_status', step: 'fetch' });
    expect(JSON.stringify(failed.error)).toContain('404');
    const firstRow = (await getSteps(t, id)).find((s) => s.name === 'first')!;

    ready = true;
    expect(await redrive(t, id)).toHaveLength(1);
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', error: null, redrives: 1, redrive_requested_at: null, output: { pages: 12, n: 1 } });
    expect(hits).toBe(2);
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.attempt, s.status])).toEqual([
      ['first', 1, 'done'],
      ['fetch', 1, 'failed'],
      ['fetch', 2, 'done'],
      ['use', 1, 'done'],
    ]);
    // The done step kept its row and result; the new attempt is a retry of the same step.
    expect(steps[0]).toMatchObject({ id: firstRow.id, result: { n: 1 } });
    expect(steps[2]!.first_attempt_id).toBe(steps[1]!.id);
    expect(steps[2]!.args).toEqual(steps[1]!.args);
  });

  it('re-runs only the failed items of a forEach and joins once, with every result in input order', async () => {
    const t = await createTestSchema();
    const board = new Switchboard();
    board.broken.add('b').add('d');
    await startExecutor(t, { tools: [board] });
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.items}}', step: 'work', concurrency: 2 }, join: 'collect' },
        work: { tool: 'test.work', args: { key: '{{item}}' }, retry: { maxAttempts: 1 } },
        collect: { tool: 'core.echo', args: { all: '{{results}}' }, done: true, output: '{{result.all}}' },
      },
    }, { items: ['a', 'b', 'c', 'd', 'e'] });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    const before = await getSteps(t, id);
    const doneBefore = new Set(before.filter((s) => s.name === 'work' && s.status === 'done').map((s) => s.item_index));
    const callsBefore = new Map(board.calls);

    board.broken.clear();
    await redrive(t, id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual(['a', 'b', 'c', 'd', 'e'].map((k) => ({ done: k })));
    const steps = await getSteps(t, id);
    expect(steps.filter((s) => s.name === 'collect')).toHaveLength(1);
    expect(steps.filter((s) => s.name === 'each')).toHaveLength(1);
    // Items that were done kept their one row and were not called again.
    for (const i of doneBefore) {
      expect(steps.filter((s) => s.name === 'work' && s.item_index === i)).toHaveLength(1);
      expect(board.calls.get(['a', 'b', 'c', 'd', 'e'][i!]!)).toBe(callsBefore.get(['a', 'b', 'c', 'd', 'e'][i!]!));
    }
    // Every item ends with one done row.
    for (let i = 0; i < 5; i++) expect(steps.filter((s) => s.name === 'work' && s.item_index === i && s.status === 'done')).toHaveLength(1);
    expect(board.calls.get('b')).toBe(2);
  });

  it('a nested fan-out that failed fast is reopened: only its failed branch re-runs and each join happens once', async () => {
    const t = await createTestSchema();
    const board = new Switchboard();
    board.broken.add('x2');
    await startExecutor(t, { tools: [board] });
    const id = await insertWorkflow(t, {
      start: 'outer',
      steps: {
        outer: { parallel: ['left', 'inner'], join: 'end' },
        left: { tool: 'test.work', args: { key: 'left' } },
        inner: { parallel: ['x1', 'x2'], join: 'innerJoin' },
        x1: { tool: 'test.work', args: { key: 'x1' } },
        x2: { tool: 'test.work', args: { key: 'x2' }, retry: { maxAttempts: 1 } },
        innerJoin: { tool: 'core.echo', args: { inner: '{{results}}' } },
        end: { tool: 'core.echo', args: { all: '{{results}}' }, done: true, output: '{{result.all}}' },
      },
    });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    board.broken.clear();
    await redrive(t, id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ left: { done: 'left' }, inner: { inner: { x1: { done: 'x1' }, x2: { done: 'x2' } } } });
    const steps = await getSteps(t, id);
    expect(steps.filter((s) => s.name === 'innerJoin')).toHaveLength(1);
    expect(steps.filter((s) => s.name === 'end')).toHaveLength(1);
    expect(steps.filter((s) => s.name === 'inner').map((s) => s.status)).toEqual(['done']);
    expect(board.calls.get('x2')).toBe(2);
  });

  it('a gate that was waiting when the workflow failed waits again, and the flow goes on once it is approved', async () => {
    const t = await createTestSchema();
    const board = new Switchboard();
    board.broken.add('check');
    await startExecutor(t, { tools: [board] });
    const id = await insertWorkflow(t, {
      start: 'both',
      steps: {
        both: { parallel: ['approve', 'check'], join: 'end' },
        approve: { approval: { message: 'ship {{workflow.name}}?' } },
        check: { tool: 'test.work', args: { key: 'check' }, retry: { maxAttempts: 1 } },
        end: { tool: 'core.echo', args: { r: '{{results}}' }, done: true },
      },
    });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    expect((await getSteps(t, id)).find((s) => s.name === 'approve')!.status).toBe('cancelled');
    board.broken.clear();
    await redrive(t, id);
    const gate = await waitForStep(t, id, 'approve', 'pending');
    expect(gate.attempt).toBe(2);
    // It shows what it showed the first time.
    const first = (await getSteps(t, id)).find((s) => s.name === 'approve' && s.attempt === 1)!;
    expect(first.args).toMatchObject({ message: 'ship test?' });
    expect(gate.args).toEqual(first.args);
    await waitForStep(t, id, 'check', 'done');
    expect((await getWorkflow(t, id)).status).toBe('running');
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });

  it('two redrives in a row: the first fails again while the cause remains, the second completes', async () => {
    const t = await createTestSchema();
    const board = new Switchboard();
    board.broken.add('k');
    await startExecutor(t, { tools: [board] });
    const id = await insertWorkflow(t, { start: 's', steps: { s: { tool: 'test.work', args: { key: 'k' }, retry: { maxAttempts: 1 } } } });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    await redrive(t, id);
    const again = await waitFor(async () => {
      const wf = await getWorkflow(t, id);
      return wf.status === 'failed' && wf.redrives === 1 ? wf : undefined;
    }, 'the first redrive to fail again');
    expect(again.error).toMatchObject({ code: 'broken', step: 's', attempt: 2 });
    board.broken.clear();
    await redrive(t, id);
    const wf = await waitForWorkflow(t, id, ['completed']);
    expect(wf.redrives).toBe(2);
    expect((await getSteps(t, id)).map((s) => [s.attempt, s.status])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'done'],
    ]);
  });

  it('a request made while no executor runs stays stamped and is handled when one starts', async () => {
    const t = await createTestSchema();
    const board = new Switchboard();
    board.broken.add('k');
    const first = await startExecutor(t, { tools: [board] });
    const id = await insertWorkflow(t, { start: 's', steps: { s: { tool: 'test.work', args: { key: 'k' }, retry: { maxAttempts: 1 } } } });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    await first.stop({ graceMs: 0 });
    board.broken.clear();
    await redrive(t, id);
    const waiting = await getWorkflow(t, id);
    expect(waiting.status).toBe('running');
    expect(waiting.redrive_requested_at).not.toBeNull();
    expect(waiting.redrives).toBe(0);
    await startExecutor(t, { tools: [board] });
    const wf = await waitForWorkflow(t, id, ['completed']);
    expect(wf).toMatchObject({ redrives: 1, redrive_requested_at: null });
  });

  it('a workflow that ran past its timeout gets a fresh deadline from the redrive', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'wait', timeout: '300ms', steps: { wait: { approval: {}, next: 'end' }, end: { tool: 'core.noop' } } });
    const failed = await waitForWorkflow(t, id);
    expect(failed.error).toMatchObject({ code: 'deadline' });
    await redrive(t, id);
    const gate = await waitFor(async () => (await getSteps(t, id)).find((s) => s.name === 'wait' && s.attempt === 2), 'the gate to wait again');
    expect(['pending', 'cancelled']).toContain(gate.status);
    const again = await waitForWorkflow(t, id);
    // It waited its whole timeout again, from the redrive.
    expect(again).toMatchObject({ status: 'failed', redrives: 1, error: { code: 'deadline' } });
    expect(new Date(again.completed_at!).getTime()).toBeGreaterThanOrEqual(new Date(gate.created_at).getTime() + 250);
  });
});

describe('redrive refused', () => {
  it('the guard refuses a workflow that is not failed, saying why', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: {} } } });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    await expect(t.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1`, [id])).rejects.toThrow(/only a failed workflow can be redriven/);
    // The contract's guarded form changes nothing.
    expect(await redrive(t, id)).toHaveLength(0);
  });

  it('the executor refuses a workflow whose flow is invalid under today\'s caps, keeping the original error', async () => {
    const t = await createTestSchema();
    const board = new Switchboard();
    board.broken.add('k');
    const first = await startExecutor(t, { tools: [board] });
    const id = await insertWorkflow(t, { start: 's', maxSteps: 50, steps: { s: { tool: 'test.work', args: { key: 'k' }, retry: { maxAttempts: 1 } } } });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    await first.stop({ graceMs: 0 });
    await startExecutor(t, { tools: [board], caps: { steps: 10 } });
    board.broken.clear();
    await redrive(t, id);
    const wf = await waitFor(async () => {
      const row = await getWorkflow(t, id);
      return row.status === 'failed' && row.redrive_requested_at === null ? row : undefined;
    }, 'the redrive to be refused');
    expect(wf.error).toMatchObject({
      code: 'redrive_refused',
      details: { reason: 'invalid_flow', issues: [{ path: 'maxSteps' }], error: { code: 'broken', step: 's' } },
    });
    expect(wf.redrives).toBe(0);
    expect(await getSteps(t, id)).toHaveLength(1);
  });

  it('a flow that failed the workflow on purpose is refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: {}, done: { status: 'failed', error: 'no' } } } });
    expect((await waitForWorkflow(t, id)).error).toMatchObject({ code: 'failed_by_flow' });
    await redrive(t, id);
    const wf = await waitFor(async () => {
      const row = await getWorkflow(t, id);
      return row.status === 'failed' && row.redrive_requested_at === null ? row : undefined;
    }, 'the redrive to be refused');
    expect(wf.error).toMatchObject({ code: 'redrive_refused', details: { reason: 'failed_by_flow', error: { code: 'failed_by_flow' } } });
  });
});
