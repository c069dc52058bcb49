import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../../src/events.js';
import { describeEvent } from '../../src/cli/follow.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const rowsNamed = async (t: TestSchema, id: string, name: string) => (await getSteps(t, id)).filter((s) => s.name === name);

const approve = (t: TestSchema, stepId: string) =>
  t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [stepId]);

describe('parallel + join', () => {
  it('runs the join once after every branch, with results keyed by branch and steps.X.result', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b1', 'c'], join: 'merge' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        // A branch that is a chain of several steps: its last step's result is the branch's.
        b1: { tool: 'core.sleep', args: { ms: 30 }, next: 'b2' },
        b2: { tool: 'core.echo', args: { v: 'b', slept: '{{steps.b1.result.slept}}' }, next: 'b3' },
        b3: { tool: 'core.echo', args: { last: '{{steps.b2.result.v}}' } },
        c: { tool: 'core.noop' },
        merge: { tool: 'core.echo', args: { all: '{{results}}', a: '{{steps.a.result.v}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ all: { a: { v: 'a' }, b1: { last: 'b' }, c: null }, a: 'a' });
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(1);
    const steps = await getSteps(t, id);
    const merge = steps.find((s) => s.name === 'merge')!;
    // The join was created after the last branch step finished.
    for (const s of steps.filter((s) => s.name !== 'merge' && s.name !== 'fork')) expect(Number(s.id)).toBeLessThan(Number(merge.id));
  });

  it('joins branches that end with the seed form "join": "merge" (the fork names no join)', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'first',
      steps: {
        first: { tool: 'core.echo', args: { topic: 't' }, next: 'fork' },
        fork: { parallel: ['web', 'kb1'] },
        web: { tool: 'core.echo', args: { from: 'web' }, join: 'merge' },
        kb1: { tool: 'core.echo', args: { from: 'kb1' }, next: 'kb2' },
        kb2: { tool: 'core.echo', args: { from: 'kb2' }, join: 'merge' },
        merge: { tool: 'core.echo', args: { results: '{{results}}', kb: '{{steps.kb2.result.from}}' }, done: true },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ results: { web: { from: 'web' }, kb1: { from: 'kb2' } }, kb: 'kb2' });
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(1);
  });

  it('runs the join once, when the other branch finishes, after a branch inside one branch ended it early', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['p1', 'q1'], join: 'merge' },
        p1: { tool: 'core.echo', args: { stop: true }, branch: [{ if: 'result.stop == true', then: 'p_end' }], default: 'p2' },
        p_end: { tool: 'core.echo', args: { ended: 'early' } },
        p2: { tool: 'core.echo', args: { ended: 'late' } },
        q1: { approval: true, next: 'q2' },
        q2: { tool: 'core.echo', args: { q: 'done' } },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    await waitForStep(t, id, 'p_end', 'done');
    const gate = await waitForStep(t, id, 'q1', 'pending');
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(0);
    await approve(t, gate.id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: { p1: { ended: 'early' }, q1: { q: 'done' } } });
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(1);
    expect(await rowsNamed(t, id, 'p2')).toHaveLength(0);
  });
});

describe('ending inside a fan-out', () => {
  it('done: true inside a branch ends the workflow at once and cancels the live siblings', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['slow', 'gate'], join: 'merge' },
        slow: { tool: 'core.sleep', args: { ms: 60_000 } },
        gate: { approval: true, next: 'finish' },
        finish: { tool: 'core.echo', args: { early: true }, done: true },
        merge: { tool: 'core.noop' },
      },
    });
    await waitForStep(t, id, 'slow', 'running');
    const gate = await waitForStep(t, id, 'gate', 'pending');
    await approve(t, gate.id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ early: true });
    expect((await rowsNamed(t, id, 'slow'))[0]!.status).toBe('cancelled');
    expect(await rowsNamed(t, id, 'merge')).toHaveLength(0);
    await waitFor(() => executor.runningCount === 0, 'the aborted sleep to leave the executor');
  });
});

describe('forEach', () => {
  it('runs one step per item with {{item}}, {{index}} and the "as" alias, results in input order', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.docs}}', step: 'summarize', as: 'doc' }, join: 'report' },
        // Later items finish first: the join still sees input order.
        summarize: { tool: 'core.sleep', args: { ms: '{{doc.ms}}' }, next: 'label' },
        label: { tool: 'core.echo', args: { title: '{{doc.title}}', same: '{{item.title}}', index: '{{index}}', at: '#{{index}}' } },
        report: { tool: 'core.echo', args: { items: '{{results}}' }, done: true, output: '{{result.items}}' },
      },
    }, { docs: [{ title: 'A', ms: 60 }, { title: 'B', ms: 30 }, { title: 'C', ms: 0 }] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual([
      { title: 'A', same: 'A', index: 0, at: '#0' },
      { title: 'B', same: 'B', index: 1, at: '#1' },
      { title: 'C', same: 'C', index: 2, at: '#2' },
    ]);
    const sums = await rowsNamed(t, id, 'summarize');
    expect(sums.map((s) => [s.item_index, s.args])).toEqual([
      [0, { ms: 60 }],
      [1, { ms: 30 }],
      [2, { ms: 0 }],
    ]);
  });

  it('never has more than `concurrency` item steps live at once', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const list = [40, 10, 30, 0, 20, 10];
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'work', concurrency: 2 }, join: 'report' },
        work: { tool: 'core.sleep', args: { ms: '{{item}}' } },
        report: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { list });
    let maxLive = 0;
    const wf = await waitFor(async () => {
      const [live] = await t.q(
        `SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'work' AND status IN ('pending', 'ready', 'running')`,
        [id],
      );
      maxLive = Math.max(maxLive, live.n);
      const [w] = await t.q(`SELECT * FROM stepd.workflows WHERE id = $1`, [id]);
      return w.status === 'completed' || w.status === 'failed' ? w : undefined;
    }, 'the forEach workflow to finish');
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: list.map((ms) => ({ slept: ms })) });
    expect(maxLive).toBeLessThanOrEqual(2);
    // From the rows themselves: each item is live from its creation until it completes. The next
    // item is created in the transaction that completes an earlier one (same now()).
    expect(await rowsNamed(t, id, 'work')).toHaveLength(list.length);
    // PostgreSQL's own timestamps, in µs (a JS Date would round them to ms).
    const stamps = await t.q(
      `SELECT extract(epoch FROM created_at) * 1e6 AS c, extract(epoch FROM completed_at) * 1e6 AS d
         FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'work' ORDER BY id`,
      [id],
    );
    const edges: { at: number; d: number }[] = [];
    for (const s of stamps) edges.push({ at: Number(s.c), d: +1 }, { at: Number(s.d), d: -1 });
    // At equal instants, completions come first: an item created as another completes replaces it.
    edges.sort((x, y) => x.at - y.at || x.d - y.d);
    let live = 0;
    let peak = 0;
    for (const e of edges) peak = Math.max(peak, (live += e.d));
    expect(peak).toBe(2);
  });

  it('inside an item, {{steps.NAME.result}} reads that item\'s row, not another item\'s', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'ask' }, join: 'report' },
        ask: { approval: true, next: 'use' },
        use: { tool: 'core.echo', args: { mine: '{{item}}', answer: '{{steps.ask.result.v}}' }, next: 'check' },
        check: { tool: 'core.echo', args: { same: '{{steps.use.result.mine}}' } },
        report: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { list: ['a', 'b'] });
    const gates = await waitFor(async () => {
      const rows = (await rowsNamed(t, id, 'ask')).filter((s) => s.status === 'pending');
      return rows.length === 2 ? rows.sort((x, y) => x.item_index! - y.item_index!) : undefined;
    }, 'both item gates');
    // Item 1 answers first; item 0's gate row is older (a lower id).
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"v": "b"}' WHERE id = $1`, [gates[1]!.id]);
    await waitFor(async () => (await rowsNamed(t, id, 'check')).some((s) => s.status === 'done'), 'item 1 to finish');
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"v": "a"}' WHERE id = $1`, [gates[0]!.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: [{ same: 'a' }, { same: 'b' }] });
    const uses = (await rowsNamed(t, id, 'use')).sort((x, y) => x.item_index! - y.item_index!);
    expect(uses.map((u) => u.args)).toEqual([
      { mine: 'a', answer: 'a' },
      { mine: 'b', answer: 'b' },
    ]);
  });

  it('a tool step can fan out over its own result (forEach items: {{result.hits}}), with a concurrency limit', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'search',
      steps: {
        search: { tool: 'core.echo', args: { hits: '{{input.hits}}' }, forEach: { items: '{{result.hits}}', step: 'get', concurrency: 2 }, join: 'report' },
        get: { tool: 'core.echo', args: { id: '{{item.id}}', from: '{{steps.search.result.hits[0].id}}' } },
        report: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { hits: [{ id: 7 }, { id: 8 }, { id: 9 }] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: [{ id: 7, from: 7 }, { id: 8, from: 7 }, { id: 9, from: 7 }] });
    expect((await rowsNamed(t, id, 'get')).map((s) => s.item_index)).toEqual([0, 1, 2]);
  });

  it('goes straight to the join with [] when the items are empty', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.list}}', step: 'work' }, join: 'report' },
        work: { tool: 'core.echo', args: { v: '{{item}}' } },
        report: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    }, { list: [] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ r: [] });
    expect((await getSteps(t, id)).map((s) => s.name)).toEqual(['each', 'report']);
  });
});

describe('{{results}} in the output of a join step', () => {
  it('is refused at admission as invalid_flow at steps.NAME.output, before any step ran', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b'], join: 'merge' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        b: { tool: 'core.echo', args: { v: 'b' } },
        merge: { tool: 'core.echo', args: { n: 1 }, done: true, output: { all: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'invalid_flow', issues: [{ path: 'steps.merge.output' }] });
    expect(JSON.stringify(wf.error)).toMatch(/only available in the join step's args/);
    expect(await getSteps(t, id)).toEqual([]);
  });

  it('its args carry the results and {{result}} in its output hands them on', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['a', 'b'], join: 'merge' },
        a: { tool: 'core.echo', args: { v: 'a' } },
        b: { tool: 'core.echo', args: { v: 'b' } },
        merge: { tool: 'core.echo', args: { all: '{{results}}' }, done: true, output: { joined: '{{result.all}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ joined: { a: { v: 'a' }, b: { v: 'b' } } });
  });
});

describe('a templated tool name', () => {
  it('is refused at admission as invalid_flow at steps.NAME.tool, not run as a tool of that literal name', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'call', steps: { call: { tool: '{{input.srv}}.echo', args: {}, done: true } } }, { srv: 'core' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'invalid_flow', issues: [{ path: 'steps.call.tool' }] });
    expect(JSON.stringify(wf.error)).toMatch(/tool names are not templates/);
    expect(await getSteps(t, id)).toEqual([]);
  });
});

describe('a template naming a step that failed', () => {
  it('fails the step that reads it with "failed and has no result", not "does not exist"', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['elicit'], join: 'merge' },
        elicit: { tool: 'core.fail', args: { message: 'declined', retryable: false }, onError: 'note' },
        note: { tool: 'core.echo', args: { noted: '{{error.message}}' }, next: 'use' },
        use: { tool: 'core.echo', args: { answer: '{{steps.elicit.result.answer}}' } },
        merge: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    const [use] = await rowsNamed(t, id, 'use');
    expect(use!.status).toBe('failed');
    expect(use!.error).toMatchObject({ code: 'template_error', message: 'template "{{steps.elicit.result.answer}}": step "elicit" failed and has no result' });
  });
});

describe('a retry inside a forEach', () => {
  it('announces step.retrying with the item index, so the line reads work[2] will retry', async () => {
    const t = await createTestSchema();
    const client = new pg.Client({ connectionString: t.url });
    await client.connect();
    onCleanup(() => client.end());
    const events: StepdEvent[] = [];
    client.on('notification', (msg) => {
      const e = msg.payload ? parseEvent(msg.payload) : undefined;
      if (e && e.schema === t.schema) events.push(e);
    });
    await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: ['a', 'b', 'c'], step: 'work' }, mode: 'allSettled', join: 'report' },
        work: { tool: 'core.fail', args: { message: 'down', retryable: true }, retry: { maxAttempts: 2, initial: '10ms', max: '20ms' } },
        report: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const retries = await waitFor(() => {
      const found = events.filter((e) => e.type === 'step.retrying' && e.workflowId === id);
      return found.length === 3 ? found : undefined;
    }, 'three step.retrying events');
    expect(retries.map((e) => e.itemIndex).sort()).toEqual([0, 1, 2]);
    const line = describeEvent(retries.find((e) => e.itemIndex === 2)!);
    expect(line).toMatch(/^work\[2\] will retry: attempt 2/);
  });
});
