import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const rowsNamed = async (t: TestSchema, id: string, name: string) => (await getSteps(t, id)).filter((s) => s.name === name);

const approve = (t: TestSchema, stepId: string) =>
  t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [stepId]);

describe('nested fan-outs', () => {
  it('parallel inside parallel: the inner join and the outer join each exist once, the outer after the inner', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'outer',
      steps: {
        outer: { parallel: ['a', 'inner'], join: 'outer_join' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        inner: { parallel: ['x', 'y'], join: 'inner_join' },
        x: { approval: true, next: 'x2' },
        x2: { tool: 'core.echo', args: { v: 'x' } },
        y: { tool: 'core.echo', args: { v: 'y' } },
        inner_join: { tool: 'core.echo', args: { inner: '{{results}}' } },
        outer_join: { tool: 'core.echo', args: { outer: '{{results}}' } },
      },
    });
    await waitForStep(t, id, 'a', 'done');
    await waitForStep(t, id, 'y', 'done');
    const gate = await waitForStep(t, id, 'x', 'pending');
    // Branch "a" finished, but "inner" is still running below its fork row.
    expect(await rowsNamed(t, id, 'outer_join')).toHaveLength(0);
    expect(await rowsNamed(t, id, 'inner_join')).toHaveLength(0);
    await approve(t, gate.id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(await rowsNamed(t, id, 'inner_join')).toHaveLength(1);
    expect(await rowsNamed(t, id, 'outer_join')).toHaveLength(1);
    expect(wf.output).toEqual({ outer: { a: { v: 'a' }, inner: { inner: { x: { v: 'x' }, y: { v: 'y' } } } } });
  });

  it('forEach inside parallel: the forEach join and the outer join each exist once', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'outer',
      steps: {
        outer: { parallel: ['a', 'each'], join: 'outer_join' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        each: { forEach: { items: '{{input.list}}', step: 'hold' }, join: 'each_join' },
        hold: { approval: true, next: 'item' },
        item: { tool: 'core.echo', args: { v: '{{item}}', i: '{{index}}' } },
        each_join: { tool: 'core.echo', args: { items: '{{results}}' } },
        outer_join: { tool: 'core.echo', args: { outer: '{{results}}' } },
      },
    }, { list: ['p', 'q'] });
    await waitForStep(t, id, 'a', 'done');
    const gates = await waitFor(async () => {
      const rows = (await rowsNamed(t, id, 'hold')).filter((s) => s.status === 'pending');
      return rows.length === 2 ? rows : undefined;
    }, 'two pending item gates');
    expect(await rowsNamed(t, id, 'outer_join')).toHaveLength(0);
    for (const g of gates) await approve(t, g.id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(await rowsNamed(t, id, 'each_join')).toHaveLength(1);
    expect(await rowsNamed(t, id, 'outer_join')).toHaveLength(1);
    expect(wf.output).toEqual({ outer: { a: { v: 'a' }, each: { items: [{ v: 'p', i: 0 }, { v: 'q', i: 1 }] } } });
  });

  it('parallel inside a forEach item: one inner join per item, one forEach join, items in order', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'pair' }, join: 'each_join' },
        pair: { parallel: ['left', 'right'], join: 'pair_join' },
        // The item that says hold waits at a gate in its left branch.
        left: { tool: 'core.echo', args: { hold: '{{item.hold}}' }, branch: [{ if: 'result.hold == true', then: 'held' }], default: 'left_end' },
        held: { approval: true, next: 'left_end' },
        left_end: { tool: 'core.echo', args: { side: 'left' } },
        right: { tool: 'core.echo', args: { side: 'right' } },
        pair_join: { tool: 'core.echo', args: { v: '{{item.v}}', i: '{{index}}', sides: '{{results}}' } },
        each_join: { tool: 'core.echo', args: { all: '{{results}}' } },
      },
    }, { list: [{ v: 'm', hold: false }, { v: 'n', hold: true }, { v: 'o', hold: false }] });
    const gate = await waitForStep(t, id, 'held', 'pending');
    await waitFor(async () => (await rowsNamed(t, id, 'pair_join')).filter((s) => s.status === 'done').length === 2, 'two items joined');
    // Items 0 and 2 are finished; item 1 is still live below its (done) fork row.
    expect(await rowsNamed(t, id, 'each_join')).toHaveLength(0);
    await approve(t, gate.id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(await rowsNamed(t, id, 'pair_join')).toHaveLength(3);
    expect(await rowsNamed(t, id, 'each_join')).toHaveLength(1);
    const sides = { left: { side: 'left' }, right: { side: 'right' } };
    expect(wf.output).toEqual({
      all: [
        { v: 'm', i: 0, sides },
        { v: 'n', i: 1, sides },
        { v: 'o', i: 2, sides },
      ],
    });
  });

  it('parallel inside a forEach item can read {{item}} in its branches', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'pair' }, join: 'each_join' },
        pair: { parallel: ['left', 'right'], join: 'pair_join' },
        left: { tool: 'core.echo', args: { left: '{{item}}' } },
        right: { tool: 'core.echo', args: { right: '{{index}}' } },
        pair_join: { tool: 'core.echo', args: { sides: '{{results}}' } },
        each_join: { tool: 'core.echo', args: { all: '{{results}}' } },
      },
    }, { list: ['m', 'n'] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toBeNull();
    expect(wf.output).toEqual({
      all: [{ sides: { left: { left: 'm' }, right: { right: 0 } } }, { sides: { left: { left: 'n' }, right: { right: 1 } } }],
    });
  });
});

describe('a nested fork without a join', () => {
  it('gives the enclosing join the inner results as that branch\'s value, like a top-level fork gives its output', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'outer',
      steps: {
        outer: { parallel: ['a', 'inner', 'each'], join: 'outer_join' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        inner: { parallel: ['x', 'y'] },
        x: { tool: 'core.echo', args: { v: 'x' } },
        y: { tool: 'core.sleep', args: { ms: 10 } },
        each: { forEach: { items: '{{input.list}}', step: 'item' } },
        item: { tool: 'core.echo', args: { v: '{{item}}' } },
        outer_join: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { list: [1, 2] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: { a: { v: 'a' }, inner: { x: { v: 'x' }, y: { slept: 10 } }, each: [{ v: 1 }, { v: 2 }] } });
    expect(await rowsNamed(t, id, 'outer_join')).toHaveLength(1);
  });

  it('at the top level, ends the workflow with the fan-out results as its output', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: { fork: { parallel: ['x', 'y'] }, x: { tool: 'core.echo', args: { v: 'x' } }, y: { tool: 'core.noop' } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ x: { v: 'x' }, y: null });
  });
});

describe('a failing branch inside a nested fan-out', () => {
  it('fails only its item of an allSettled forEach: the inner fan-out is cancelled, the other items complete', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'pair' }, join: 'report', mode: 'allSettled' },
        pair: { parallel: ['left', 'right'], join: 'pair_join' },
        left: { tool: 'core.echo', args: { fail: '{{item.fail}}' }, branch: [{ if: 'result.fail == true', then: 'bad' }], default: 'ok' },
        bad: { tool: 'core.fail', args: { message: 'item broke', code: 'broken' } },
        ok: { tool: 'core.echo', args: { ok: true } },
        right: { tool: 'core.sleep', args: { ms: '{{item.ms}}' } },
        pair_join: { tool: 'core.echo', args: { sides: '{{results}}' } },
        report: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { list: [{ fail: false, ms: 0 }, { fail: true, ms: 60_000 }, { fail: false, ms: 0 }] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const r = (wf.output as { r: { status: string; result?: unknown; error?: unknown }[] }).r;
    const fine = { status: 'done', result: { sides: { left: { ok: true }, right: { slept: 0 } } } };
    expect(r[0]).toEqual(fine);
    expect(r[1]).toMatchObject({ status: 'failed', error: { code: 'broken', message: 'item broke', step: 'bad' } });
    expect(r[2]).toEqual(fine);
    const rights = (await rowsNamed(t, id, 'right')).sort((a, b) => Number(a.id) - Number(b.id));
    expect(rights.map((s) => s.status).sort()).toEqual(['cancelled', 'done', 'done']);
    expect(await rowsNamed(t, id, 'pair_join')).toHaveLength(2);
    expect(await rowsNamed(t, id, 'report')).toHaveLength(1);
    await waitFor(() => executor.runningCount === 0, 'the cancelled sleep to leave the executor');
  });

  it('routes to the fork\'s onError when a failFast fan-out fails, cancelling its live branches', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['slow', 'bad'], join: 'merge', onError: 'recover' },
        slow: { tool: 'core.sleep', args: { ms: 60_000 } },
        bad: { approval: true, next: 'boom' },
        boom: { tool: 'core.fail', args: { message: 'branch broke' } },
        merge: { tool: 'core.noop' },
        recover: { tool: 'core.echo', args: { why: '{{error.message}}', at: '{{error.step}}' } },
      },
    });
    await waitForStep(t, id, 'slow', 'running');
    await approve(t, (await waitForStep(t, id, 'bad', 'pending')).id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ why: 'branch broke', at: 'boom' });
    expect((await rowsNamed(t, id, 'slow'))[0]!.status).toBe('cancelled');
    expect((await rowsNamed(t, id, 'fork'))[0]).toMatchObject({ status: 'failed', error: { step: 'boom' } });
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(0);
    await waitFor(() => executor.runningCount === 0, 'the cancelled sleep to leave the executor');
  });
});
