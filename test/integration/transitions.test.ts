import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const names = async (t: TestSchema, id: string) => (await getSteps(t, id)).map((s) => s.name);

describe('next and branch', () => {
  it('runs a next chain in order, each step once, and ends with the last result', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'a',
      steps: {
        a: { tool: 'core.echo', args: { n: 1 }, next: 'b' },
        b: { tool: 'core.echo', args: { prev: '{{steps.a.result.n}}', n: 2 }, next: 'c' },
        c: { tool: 'core.echo', args: { prev: '{{steps.b.result}}', topic: 'topic: {{input.topic}}' } },
      },
    }, { topic: 'x' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ prev: { prev: 1, n: 2 }, topic: 'topic: x' });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['a', 'done', 1],
      ['b', 'done', 1],
      ['c', 'done', 1],
    ]);
  });

  it('takes the first branch whose CEL condition over result, input or steps matches, else the default', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: 'first',
      steps: {
        first: { tool: 'core.echo', args: { kind: '{{input.kind}}' }, next: 'check' },
        check: {
          tool: 'core.echo',
          args: { hits: '{{input.hits}}' },
          branch: [
            { if: 'size(result.hits) == 0', then: 'empty' },
            { if: 'input.level > 3', then: 'urgent' },
            { if: 'steps.first.result.kind == "vip"', then: 'vip' },
          ],
          default: 'normal',
        },
        empty: { tool: 'core.echo', args: { route: 'empty' } },
        urgent: { tool: 'core.echo', args: { route: 'urgent' } },
        vip: { tool: 'core.echo', args: { route: 'vip' } },
        normal: { tool: 'core.echo', args: { route: 'normal' } },
      },
    };
    const cases: [Record<string, unknown>, string][] = [
      [{ hits: [], level: 9, kind: 'vip' }, 'empty'],
      [{ hits: [1], level: 5, kind: 'vip' }, 'urgent'],
      [{ hits: [1], level: 1, kind: 'vip' }, 'vip'],
      [{ hits: [1], level: 1, kind: 'plain' }, 'normal'],
    ];
    const ids = await Promise.all(cases.map(([input]) => insertWorkflow(t, flow, input)));
    for (const [i, [, route]] of cases.entries()) {
      const wf = await waitForWorkflow(t, ids[i]!);
      expect(wf.status).toBe('completed');
      expect(wf.output).toEqual({ route });
      expect(await names(t, ids[i]!)).toEqual(['first', 'check', route]);
    }
  });

  it('fails the workflow with no_branch_matched when no condition matches and there is no default', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'check',
      steps: {
        check: { tool: 'core.echo', args: { n: 1 }, branch: [{ if: 'result.n > 5', then: 'big' }] },
        big: { tool: 'core.noop' },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'no_branch_matched', step: 'check' });
    expect(await names(t, id)).toEqual(['check']);
  });
});

describe('ending a workflow', () => {
  it('completes with the done step\'s output template, resolved over result, steps and input', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'a',
      steps: {
        a: { tool: 'core.echo', args: { v: 'A' }, next: 'b' },
        b: {
          tool: 'core.echo',
          args: { v: 'B' },
          done: true,
          output: { mine: '{{result.v}}', first: '{{steps.a.result.v}}', who: '{{input.who}}', text: '{{result.v}}-{{steps.a.result.v}}' },
        },
      },
    }, { who: 'me' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ mine: 'B', first: 'A', who: 'me', text: 'B-A' });
  });

  it('fails the workflow when a step says done: {status: failed, error}', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'a',
      steps: { a: { tool: 'core.echo', args: { v: 1 }, done: { status: 'failed', error: 'the flow gave up' } } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ message: 'the flow gave up', step: 'a' });
    expect(wf.output).toBeNull();
    expect((await getSteps(t, id))[0]!.status).toBe('done');
  });

  it('completes with the result of a step that has no transition, outside any fan-out', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'only', steps: { only: { tool: 'core.echo', args: { last: true } } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ last: true });
  });
});

describe('loops', () => {
  it('loops back to an earlier step until a condition over steps results changes', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    // work → ask (a gate another service answers) → decide: back to work while it says more.
    const id = await insertWorkflow(t, {
      start: 'work',
      steps: {
        work: { tool: 'core.echo', args: { round: 'r' }, next: 'ask' },
        ask: { approval: true, next: 'decide' },
        decide: {
          tool: 'core.echo',
          args: { n: '{{steps.ask.result.n}}' },
          branch: [{ if: 'steps.ask.result.more == true', then: 'work' }],
          default: 'finish',
        },
        finish: { tool: 'core.echo', args: { rounds: '{{steps.decide.result.n}}' } },
      },
    });
    const answers = [{ more: true, n: 1 }, { more: true, n: 2 }, { more: false, n: 3 }];
    for (const [round, answer] of answers.entries()) {
      const gate = await waitForStep(t, id, 'ask', 'pending');
      expect((await getSteps(t, id)).filter((s) => s.name === 'work')).toHaveLength(round + 1);
      await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = $2 WHERE id = $1 AND status = 'pending'`, [gate.id, JSON.stringify(answer)]);
    }
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ rounds: 3 });
    expect(await names(t, id)).toEqual(['work', 'ask', 'decide', 'work', 'ask', 'decide', 'work', 'ask', 'decide', 'finish']);
  });

  it('a loop can run a whole fan-out again: each instance has its own branches and join', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b'], join: 'merge' },
        a: { tool: 'core.echo', args: { a: 1 } },
        b: { approval: true },
        merge: { tool: 'core.echo', args: { r: '{{results}}' }, branch: [{ if: 'result.r.b.again == true', then: 'fork' }], default: 'end' },
        end: { tool: 'core.echo', args: { last: '{{steps.merge.result}}' } },
      },
    });
    const first = await waitForStep(t, id, 'b', 'pending');
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"again": true}' WHERE id = $1`, [first.id]);
    const second = await waitFor(async () => (await getSteps(t, id)).find((s) => s.name === 'b' && s.status === 'pending' && s.id !== first.id), 'the second b gate');
    expect((await getSteps(t, id)).filter((s) => s.name === 'merge')).toHaveLength(1);
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"again": false}' WHERE id = $1`, [second.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ last: { r: { a: { a: 1 }, b: { again: false } } } });
    expect(await names(t, id)).toEqual(['fork', 'a', 'b', 'merge', 'fork', 'a', 'b', 'merge', 'end']);
  });

  it('fails a loop that never ends with step_limit once it reaches maxSteps rows', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'a',
      maxSteps: 20,
      steps: { a: { tool: 'core.noop', next: 'b' }, b: { tool: 'core.noop', next: 'a' } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'step_limit' });
    const steps = await getSteps(t, id);
    expect(steps).toHaveLength(20);
    expect(steps.every((s) => s.status === 'done')).toBe(true);
  });
});

describe('the idempotency key', () => {
  it('creates one workflow for two inserts with the same key and ON CONFLICT (key) DO NOTHING', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const insert = () =>
      t.q(
        `INSERT INTO stepd.workflows (name, flow, input, key) VALUES ('once', $1, '{}', 'order-42')
         ON CONFLICT (key) DO NOTHING RETURNING id`,
        [JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: { ok: 1 } } } })],
      );
    const first = await insert();
    const second = await insert();
    expect(first).toHaveLength(1);
    expect(second).toHaveLength(0);
    const rows = await t.q(`SELECT id FROM stepd.workflows WHERE key = 'order-42'`);
    expect(rows).toHaveLength(1);
    const wf = await waitForWorkflow(t, first[0].id);
    expect(wf.status).toBe('completed');
    expect(await getSteps(t, wf.id)).toHaveLength(1);
  });
});
