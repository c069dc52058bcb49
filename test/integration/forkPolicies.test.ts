/**
 * Completion policies, conditional branches and paced branches on fork steps (DESIGN §2d), on
 * the real database: the join is created once, at the moment the policy holds.
 */
import { describe, expect, it } from 'vitest';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

/** `slow.wait`: waits until aborted (records the abort) or until the test releases its step by name. */
function slowTools() {
  const aborted = new Set<string>();
  const waiting = new Map<string, () => void>();
  const provider: ToolProvider = {
    prefix: 'slow',
    call: (_tool, args, ctx) =>
      new Promise((resolve, reject) => {
        waiting.set(`${ctx.workflowId}:${ctx.stepName}`, () => resolve(args));
        ctx.signal.addEventListener('abort', () => {
          aborted.add(`${ctx.workflowId}:${ctx.stepName}`);
          reject(new Error('aborted'));
        }, { once: true });
      }),
    list: async () => [{ name: 'wait' }],
  };
  return { provider, aborted, waiting, release: (wf: string, step: string) => waiting.get(`${wf}:${step}`)?.() };
}

const named = async (t: TestSchema, id: string, name: string) => (await getSteps(t, id)).filter((s) => s.name === name);

describe('complete: first', () => {
  it('joins on the first branch to finish, cancels the slower ones and aborts their tools', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'race',
      steps: {
        race: { parallel: ['fast', 'slow1', 'slow2'], complete: 'first', join: 'winner' },
        fast: { tool: 'core.echo', args: { who: 'fast' } },
        slow1: { tool: 'slow.wait', args: { who: 'slow1' } },
        slow2: { tool: 'slow.wait', args: { who: 'slow2' }, next: 'never' },
        never: { tool: 'core.echo', args: {} },
        winner: { tool: 'core.echo', args: { results: '{{results}}', completed: '{{completed}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ results: { fast: { who: 'fast' }, slow1: null, slow2: null }, completed: 1 });
    const steps = await getSteps(t, id);
    expect(steps.filter((s) => s.name === 'winner')).toHaveLength(1);
    expect(steps.filter((s) => s.name.startsWith('slow')).map((s) => s.status)).toEqual(['cancelled', 'cancelled']);
    await waitFor(() => slow.aborted.size === 2 || undefined, 'both slow tools aborted');
  });
});

describe('complete: atLeast', () => {
  it('with cancelRemaining false, joins after N and lets the rest finish; the join is created once', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b', 'c'], complete: { atLeast: 2 }, cancelRemaining: false, join: 'quorum' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        b: { tool: 'core.echo', args: { v: 'b' } },
        c: { tool: 'slow.wait', args: { v: 'c' } },
        quorum: { tool: 'core.echo', args: { n: '{{completed}}', r: '{{results}}' } },
      },
    });
    const quorum = await waitFor(async () => (await named(t, id, 'quorum')).find((s) => s.status === 'done'), 'the join ran');
    expect(quorum.result).toEqual({ n: 2, r: { a: { v: 'a' }, b: { v: 'b' }, c: null } });
    // The workflow waits for the branch left running; it finishes, and no second join appears.
    await waitFor(() => slow.waiting.has(`${id}:c`) || undefined, 'c is running');
    // The workflow waits for the branch left running.
    expect((await t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [id]))[0].status).toBe('running');
    slow.release(id, 'c');
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ n: 2, r: { a: { v: 'a' }, b: { v: 'b' }, c: null } });
    expect(await named(t, id, 'quorum')).toHaveLength(1);
    expect((await named(t, id, 'c'))[0]!.status).toBe('done');
    expect(slow.aborted.size).toBe(0);
  });

  it('fails with join_unreachable when too many branches failed (allSettled) to reach N', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b', 'c'], mode: 'allSettled', complete: { atLeast: 2 }, join: 'j' },
        a: { tool: 'core.echo', args: {} },
        b: { tool: 'core.fail', args: { message: 'no' } },
        c: { tool: 'core.fail', args: { message: 'no' } },
        j: { tool: 'core.echo', args: {} },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'join_unreachable', step: 'fork' });
    expect(await named(t, id, 'j')).toHaveLength(0);
  });
});

describe('complete: when', () => {
  it('sees results and completed, and joins when the condition holds', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: {
          parallel: ['a', 'b', 'c'],
          complete: { when: 'results.b != null && results.b.ok == true && completed >= 1' },
          join: 'j',
        },
        a: { tool: 'slow.wait', args: { ok: false } },
        b: { tool: 'core.echo', args: { ok: true } },
        c: { tool: 'slow.wait', args: {} },
        j: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: { a: null, b: { ok: true }, c: null } });
    await waitFor(() => slow.aborted.size === 2 || undefined, 'a and c aborted');
  });
});

describe('conditional branches', () => {
  it('starts only the branches whose condition holds; none holding runs the join at once', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: 'pick',
      steps: {
        pick: { tool: 'core.echo', args: { n: '{{input.n}}' }, next: 'fork' },
        fork: { parallel: [{ if: 'result.n > 1', then: 'big' }, { if: 'input.n > 5', then: 'huge' }, { if: 'result.n < 0', then: 'neg' }], join: 'j' },
        big: { tool: 'core.echo', args: { b: true } },
        huge: { tool: 'core.echo', args: { h: true } },
        neg: { tool: 'core.echo', args: { neg: true } },
        j: { tool: 'core.echo', args: { r: '{{results}}', c: '{{completed}}' } },
      },
    };
    const some = await insertWorkflow(t, flow, { n: 3 });
    const none = await insertWorkflow(t, flow, { n: 0 });
    expect((await waitForWorkflow(t, some)).output).toEqual({ r: { big: { b: true }, huge: null, neg: null }, c: 1 });
    expect((await waitForWorkflow(t, none)).output).toEqual({ r: { big: null, huge: null, neg: null }, c: 0 });
    expect((await getSteps(t, none)).map((s) => s.name)).toEqual(['pick', 'fork', 'j']);
  });
});

describe('concurrency on parallel', () => {
  it('keeps at most N branches live, started in listed order', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b', 'c'], concurrency: 1, join: 'j' },
        a: { tool: 'slow.wait', args: { v: 'a' } },
        b: { tool: 'slow.wait', args: { v: 'b' } },
        c: { tool: 'slow.wait', args: { v: 'c' } },
        j: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    for (const name of ['a', 'b', 'c']) {
      await waitFor(() => slow.waiting.has(`${id}:${name}`) || undefined, `${name} running`);
      const live = (await getSteps(t, id)).filter((s) => ['ready', 'running'].includes(s.status));
      expect(live.map((s) => s.name)).toEqual([name]);
      slow.release(id, name);
    }
    const wf = await waitForWorkflow(t, id);
    expect(wf.output).toEqual({ r: { a: { v: 'a' }, b: { v: 'b' }, c: { v: 'c' } } });
  });
});

describe('policies inside branches, join-less forks and onError', () => {
  it('a race nested in a parallel branch joins once; the outer join waits only for the branches, the workflow for the branch left running', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'outer',
      steps: {
        outer: { parallel: ['race', 'other'], join: 'end' },
        race: { parallel: ['quick', 'lag'], complete: 'first', cancelRemaining: false, join: 'won' },
        quick: { tool: 'core.echo', args: { q: 1 } },
        lag: { tool: 'slow.wait', args: { l: 1 } },
        won: { tool: 'core.echo', args: { r: '{{results}}' } },
        other: { tool: 'core.echo', args: { o: 1 } },
        end: { tool: 'core.echo', args: { all: '{{results}}' } },
      },
    });
    const end = await waitFor(async () => (await named(t, id, 'end')).find((s) => s.status === 'done'), 'the outer join ran');
    expect(end.result).toEqual({ all: { race: { r: { quick: { q: 1 }, lag: null } }, other: { o: 1 } } });
    await waitFor(() => slow.waiting.has(`${id}:lag`) || undefined, 'lag running');
    expect((await t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [id]))[0].status).toBe('running');
    slow.release(id, 'lag');
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual(end.result);
    expect(await named(t, id, 'won')).toHaveLength(1);
    expect(await named(t, id, 'end')).toHaveLength(1);
  });

  it('a join-less fork at the top level with cancelRemaining false completes the workflow when its last branch ends', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'race',
      steps: {
        race: { parallel: ['quick', 'lag'], complete: 'first', cancelRemaining: false },
        quick: { tool: 'core.echo', args: { q: 1 } },
        lag: { tool: 'slow.wait', args: { l: 1 } },
      },
    });
    await waitFor(() => slow.waiting.has(`${id}:lag`) || undefined, 'lag running');
    await waitFor(async () => (await named(t, id, 'quick'))[0]?.status === 'done' || undefined, 'quick done');
    expect((await t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [id]))[0].status).toBe('running');
    slow.release(id, 'lag');
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect((wf.output as Record<string, unknown>).quick).toEqual({ q: 1 });
  });

  it('first on a fork that started no branch fails it with join_unreachable, which its onError handles', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: [{ if: 'input.go', then: 'a' }], complete: 'first', join: 'j', onError: 'none' },
        a: { tool: 'core.echo', args: {} },
        j: { tool: 'core.echo', args: {} },
        none: { tool: 'core.echo', args: { why: '{{error.code}}' } },
      },
    }, { go: false });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ why: 'join_unreachable' });
    expect((await named(t, id, 'fork'))[0]).toMatchObject({ status: 'failed', error: { code: 'join_unreachable', step: 'fork' } });
  });

  it('paces the branches whose condition held, in listed order', async () => {
    const t = await createTestSchema();
    const slow = slowTools();
    await startExecutor(t, { tools: [slow.provider] });
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: [{ if: 'true', then: 'a' }, { if: 'false', then: 'b' }, 'c'], concurrency: 1, join: 'j' },
        a: { tool: 'slow.wait', args: { v: 'a' } },
        b: { tool: 'slow.wait', args: { v: 'b' } },
        c: { tool: 'slow.wait', args: { v: 'c' } },
        j: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    for (const name of ['a', 'c']) {
      await waitFor(() => slow.waiting.has(`${id}:${name}`) || undefined, `${name} running`);
      expect((await getSteps(t, id)).filter((s) => ['ready', 'running'].includes(s.status)).map((s) => s.name)).toEqual([name]);
      slow.release(id, name);
    }
    expect((await waitForWorkflow(t, id)).output).toEqual({ r: { a: { v: 'a' }, b: null, c: { v: 'c' } } });
  });

  it('when the work wins a race against a signal, the wait is cancelled and a later signal matches nothing', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'race',
      steps: {
        race: { parallel: ['work', 'stop'], complete: 'first', join: 'after' },
        work: { tool: 'core.echo', args: { done: true } },
        stop: { signal: { name: 'stop.now', key: 'k' } },
        after: { tool: 'core.echo', args: { stopped: '{{= results.stop != null }}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.output).toEqual({ stopped: false });
    expect((await named(t, id, 'stop'))[0]!.status).toBe('cancelled');
    await t.q(`INSERT INTO stepd.signals (name, key) VALUES ('stop.now', 'k')`);
    expect((await named(t, id, 'stop')).map((s) => s.status)).toEqual(['cancelled']);
  });
});
