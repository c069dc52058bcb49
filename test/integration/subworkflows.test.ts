import { describe, expect, it } from 'vitest';
import {
  createTestSchema,
  getSteps,
  getWorkflow,
  insertWorkflow,
  startExecutor,
  waitFor,
  waitForStep,
  waitForWorkflow,
  type TestSchema,
} from '../helpers/db.js';
import type { WorkflowRow } from '../../src/db/tables.js';

/** Registers `flow` as the next version of `name` (the registry numbers it). */
async function registerFlow(t: TestSchema, name: string, flow: unknown): Promise<number> {
  const rows = await t.q<{ version: number }>(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2) RETURNING version`, [name, JSON.stringify(flow)]);
  return rows[0]!.version;
}

async function childrenOf(t: TestSchema, parentId: string): Promise<WorkflowRow[]> {
  return t.q<WorkflowRow>(`SELECT * FROM stepd.workflows WHERE parent_id = $1 ORDER BY id`, [parentId]);
}

async function waitForChild(t: TestSchema, parentId: string, n = 1): Promise<WorkflowRow> {
  return waitFor(async () => (await childrenOf(t, parentId))[n - 1], `child ${n} of workflow ${parentId}`);
}

const ready = (t: TestSchema, stepId: string, result?: unknown) =>
  t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = $2 WHERE id = $1 AND status = 'pending'`, [stepId, result === undefined ? null : JSON.stringify(result)]);

const CHILD_DOUBLES = {
  start: 'work',
  steps: { work: { tool: 'core.echo', args: { doubled: '{{input.x}}{{input.x}}' }, done: true, output: '{{result}}' } },
};

describe('sub-workflows', () => {
  it("starts the registered flow as a child and takes the child's output as the step's result", async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'child', { start: 'old', steps: { old: { tool: 'core.echo', args: { v: 1 } } } });
    const version = await registerFlow(t, 'child', CHILD_DOUBLES);
    await startExecutor(t);
    const id = await insertWorkflow(
      t,
      {
        start: 'sub',
        steps: {
          sub: { workflow: { name: 'child', input: { x: '{{input.x}}' } }, next: 'after' },
          after: { tool: 'core.echo', args: { got: '{{steps.sub.result}}' } },
        },
      },
      { x: 'ab' },
      { user: 'james' },
    );
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ got: { doubled: 'abab' } });

    const [child] = await childrenOf(t, id);
    const [sub] = await getSteps(t, id);
    expect(child).toMatchObject({ name: 'child', status: 'completed', flow_version: version, depth: 1, created_by: 'james', input: { x: 'ab' } });
    expect(child!.flow).toEqual(CHILD_DOUBLES);
    expect(child!.parent_step_id).toBe(sub!.id);
    expect(sub).toMatchObject({ name: 'sub', status: 'done', tool: null, child_id: child!.id, result: { doubled: 'abab' } });
    expect(sub!.args).toEqual({ workflow: 'child', version: null, input: { x: 'ab' } });
  });

  it('pins the version the step names', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'child', { start: 'a', steps: { a: { tool: 'core.echo', args: { v: 1 }, done: true, output: '{{result.v}}' } } });
    await registerFlow(t, 'child', { start: 'a', steps: { a: { tool: 'core.echo', args: { v: 2 }, done: true, output: '{{result.v}}' } } });
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'child', version: 1 }, done: true, output: '{{result}}' } } });
    expect((await waitForWorkflow(t, id)).output).toBe(1);
    expect((await childrenOf(t, id))[0]!.flow_version).toBe(1);
  });

  it('retries a failed child as a new child, then routes the last failure to onError', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'flaky', {
      start: 'call',
      steps: { call: { tool: 'core.fail', args: { message: 'upstream down', retryable: true, code: 'upstream' }, retry: { maxAttempts: 1 } } },
    });
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'sub',
      steps: {
        sub: { workflow: { name: 'flaky' }, retry: { maxAttempts: 2, initial: '10ms', jitter: false }, onError: 'handle' },
        handle: { tool: 'core.echo', args: { code: '{{error.code}}', message: '{{error.message}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toMatchObject({ code: 'upstream' });
    expect((wf.output as { message: string }).message).toContain('upstream down');

    const children = await childrenOf(t, id);
    expect(children.map((c) => c.status)).toEqual(['failed', 'failed']);
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['sub', 'failed', 1],
      ['sub', 'failed', 2],
      ['handle', 'done', 1],
    ]);
    expect(steps.slice(0, 2).map((s) => s.child_id)).toEqual(children.map((c) => c.id));
    expect(steps[0]!.error).toMatchObject({ code: 'upstream', retryable: true, details: { workflowId: children[0]!.id, step: 'call' } });
  });

  it('does not retry a child that failed for good, and fails the parent with its error', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'broken', { start: 'call', steps: { call: { tool: 'core.fail', args: { message: 'bad input', code: 'bad_input' } } } });
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'broken' }, retry: { maxAttempts: 3, initial: '10ms' } } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'bad_input', step: 'sub' });
    expect(await childrenOf(t, id)).toHaveLength(1);
  });

  it('fails the step with unknown_flow when no flow has that name: retry applies, then onError', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'sub',
      steps: {
        sub: { workflow: { name: 'nowhere', input: { a: 1 } }, retry: { maxAttempts: 2, initial: '10ms' }, onError: 'handle' },
        handle: { tool: 'core.echo', args: { code: '{{error.code}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.output).toEqual({ code: 'unknown_flow' });
    expect(await childrenOf(t, id)).toHaveLength(0);
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['sub', 'failed', 1],
      ['sub', 'failed', 2],
      ['handle', 'done', 1],
    ]);
    expect(steps[1]!.args).toEqual({ workflow: 'nowhere', version: null, input: { a: 1 } });
    expect(steps[1]!.error).toMatchObject({ code: 'unknown_flow', retryable: true, details: { name: 'nowhere', latest: null } });
  });

  it('a retry after unknown_flow starts the child once the flow is registered', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'soon' }, retry: { maxAttempts: 5, initial: '300ms', jitter: false }, done: true, output: '{{result}}' } } });
    await waitFor(async () => (await getSteps(t, id)).find((s) => s.status === 'failed'), 'the first attempt to fail');
    await registerFlow(t, 'soon', { start: 'a', steps: { a: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { ok: true } });
  });

  it('joins the outputs of one child per forEach item in input order', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'slow-echo', {
      start: 'wait',
      steps: {
        wait: { tool: 'core.sleep', args: { ms: '{{input.ms}}' }, next: 'say' },
        say: { tool: 'core.echo', args: { item: '{{input.item}}' }, done: true, output: '{{result.item}}' },
      },
    });
    await startExecutor(t);
    const id = await insertWorkflow(
      t,
      {
        start: 'each',
        steps: {
          each: { forEach: { items: '{{input.items}}', step: 'one' }, join: 'all' },
          one: { workflow: { name: 'slow-echo', input: { item: '{{item.name}}', ms: '{{item.ms}}' } } },
          all: { tool: 'core.echo', args: { names: '{{results}}' } },
        },
      },
      { items: [{ name: 'a', ms: 150 }, { name: 'b', ms: 0 }, { name: 'c', ms: 60 }] },
    );
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ names: ['a', 'b', 'c'] });
    const children = await childrenOf(t, id);
    expect(children.map((c) => c.input)).toEqual([
      { item: 'a', ms: 150 },
      { item: 'b', ms: 0 },
      { item: 'c', ms: 60 },
    ]);
  });

  it('bounds a flow that starts itself by the depth cap: the deepest step fails with cap_exceeded', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'rec', { start: 'again', steps: { again: { workflow: { name: 'rec', input: { from: '{{workflow.id}}' } } } } });
    await startExecutor(t, { caps: { subWorkflowDepth: 3 } });
    const id = await insertWorkflow(t, { start: 'go', steps: { go: { workflow: { name: 'rec' } } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'cap_exceeded' });
    const all = await t.q<{ depth: number; status: string }>(`SELECT depth, status FROM stepd.workflows ORDER BY id`);
    expect(all).toEqual([0, 1, 2, 3].map((depth) => ({ depth, status: 'failed' })));
    const deepest = await t.q<{ error: { code: string; details: unknown } }>(`SELECT error FROM stepd.workflows WHERE depth = 3`);
    expect(deepest[0]!.error).toMatchObject({ code: 'cap_exceeded', details: { cap: 'subWorkflowDepth', limit: 3, actual: 4 } });
  });
});

describe('sub-workflows and gates', () => {
  const PARENT = {
    start: 'sub',
    steps: {
      sub: { workflow: { name: 'needs-ok', input: { amount: '{{input.amount}}' } }, next: 'after' },
      after: { tool: 'core.echo', args: { child: '{{steps.sub.result}}' } },
    },
  };
  const CHILD = {
    start: 'ok',
    steps: {
      ok: { approval: { timeout: '1h' }, next: 'book' },
      book: { tool: 'core.echo', args: { amount: '{{input.amount}}', by: '{{steps.ok.result.by}}' }, done: true, output: '{{result}}' },
    },
  };

  it("a gate inside a child, approved with a plain UPDATE on the child's step, lets the parent go on", async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'needs-ok', CHILD);
    await startExecutor(t);
    const id = await insertWorkflow(t, PARENT, { amount: 12 });
    const child = await waitForChild(t, id);
    const gate = await waitForStep(t, child.id, 'ok', 'pending');
    expect((await getSteps(t, id))[0]).toMatchObject({ name: 'sub', status: 'pending', child_id: child.id });
    await ready(t, gate.id, { approved: true, by: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ child: { amount: 12, by: 'alice' } });
  });

  it('the guard refuses a client readying the step that waits for a child, with or without a result', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'needs-ok', CHILD);
    await startExecutor(t);
    const id = await insertWorkflow(t, PARENT, { amount: 12 });
    const child = await waitForChild(t, id);
    await waitForStep(t, child.id, 'ok', 'pending');
    const sub = (await getSteps(t, id))[0]!;
    await expect(ready(t, sub.id)).rejects.toThrow(/waits for sub-workflow/);
    await expect(ready(t, sub.id, { doubled: 'forged' })).rejects.toThrow(/waits for sub-workflow/);
    await expect(t.q(`UPDATE stepd.workflow_steps SET status = 'done', result = '{}' WHERE id = $1`, [sub.id])).rejects.toThrow(/stepd:/);
    await expect(t.q(`UPDATE stepd.workflow_steps SET status = 'ready', child_id = NULL WHERE id = $1`, [sub.id])).rejects.toThrow(/stepd:/);
    expect(await getWorkflow(t, id)).toMatchObject({ status: 'running' });
    expect((await getSteps(t, id))[0]).toMatchObject({ status: 'pending', result: null });
  });

  it('cancelling the parent cancels its live child and the child steps', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'needs-ok', CHILD);
    await startExecutor(t);
    const id = await insertWorkflow(t, PARENT, { amount: 12 });
    const child = await waitForChild(t, id);
    await waitForStep(t, child.id, 'ok', 'pending');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    expect(await getWorkflow(t, child.id)).toMatchObject({ status: 'cancelled' });
    expect((await getSteps(t, child.id)).map((s) => s.status)).toEqual(['cancelled']);
    expect((await getSteps(t, id)).map((s) => s.status)).toEqual(['cancelled']);
  });

  it('a parent that fails cancels its live children (a failFast sibling failed)', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'needs-ok', CHILD);
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'both',
      steps: {
        both: { parallel: ['sub', 'boom'], join: 'end' },
        sub: { workflow: { name: 'needs-ok', input: { amount: 1 } } },
        boom: { tool: 'core.fail', args: { message: 'no' }, retry: { maxAttempts: 1 } },
        end: { tool: 'core.noop' },
      },
    });
    const child = await waitForChild(t, id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(await waitForWorkflow(t, child.id)).toMatchObject({ status: 'cancelled' });
    expect((await getSteps(t, child.id)).every((s) => s.status === 'cancelled' || s.status === 'done')).toBe(true);
  });

  it('a child cancelled on its own fails the waiting step with cancelled, and onError applies', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'needs-ok', CHILD);
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'sub',
      steps: {
        sub: { workflow: { name: 'needs-ok', input: { amount: 1 } }, onError: 'handle' },
        handle: { tool: 'core.echo', args: { code: '{{error.code}}' } },
      },
    });
    const child = await waitForChild(t, id);
    await waitForStep(t, child.id, 'ok', 'pending');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [child.id]);
    expect((await waitForWorkflow(t, id)).output).toEqual({ code: 'cancelled' });
  });
});

describe('sub-workflows and redrive', () => {
  it('a parent that failed because its child flow was missing completes when redriven after the flow is registered', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(
      t,
      { start: 'sub', steps: { sub: { workflow: { name: 'later', input: { x: '{{input.x}}' } }, retry: { maxAttempts: 1 }, done: true, output: '{{result}}' } } },
      { x: 5 },
    );
    expect((await waitForWorkflow(t, id)).error).toMatchObject({ code: 'unknown_flow', step: 'sub' });
    await registerFlow(t, 'later', { start: 'a', steps: { a: { tool: 'core.echo', args: { x: '{{input.x}}' }, done: true, output: '{{result}}' } } });

    await t.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed'`, [id]);
    const wf = await waitForWorkflow(t, id, ['completed']);
    expect(wf.output).toEqual({ x: 5 });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['sub', 'failed', 1],
      ['sub', 'done', 2],
    ]);
    const children = await childrenOf(t, id);
    expect(children.map((c) => [c.status, c.input, c.parent_step_id])).toEqual([['completed', { x: 5 }, steps[1]!.id]]);
  });
});
