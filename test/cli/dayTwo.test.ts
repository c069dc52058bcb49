/**
 * Day-two operations from the built CLI against the real database, an executor in-process:
 * `stepd fork` (from a step, a corrected result, a new input), `stepd cancel|retry --filter…`
 * (with --dry-run listing what would change) and `stepd prune` (dry run, filters, deletion of
 * finished workflows with their steps, never a live one).
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, getWorkflow, insertWorkflow, startExecutor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

const CHAIN = {
  start: 'fetch',
  steps: {
    fetch: { tool: 'core.echo', args: { rows: '{{input.rows}}' }, next: 'double' },
    double: { tool: 'core.echo', args: { got: '{{steps.fetch.result.rows}}' }, next: 'publish' },
    publish: { tool: 'core.echo', args: { published: '{{steps.double.result.got}}' }, done: true, output: '{{result}}' },
  },
};
const GATE = { start: 'wait', steps: { wait: { approval: true, done: true } } };
const FAILS = { start: 'boom', steps: { boom: { tool: 'core.fail', args: { message: 'broken' }, done: true } } };

describe('stepd fork', () => {
  it('re-runs from a step with the earlier results copied, one corrected, and links the fork to its source', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const src = await insertWorkflow(t, CHAIN, { rows: 2 }, { name: 'report', user: 'alice' });
    expect((await waitForWorkflow(t, src)).output).toEqual({ published: 2 });

    const r = await runCli(['fork', src, '--from', 'double', '--result', 'fetch={"rows": 5}', '--json'], { env: envFor(t) });
    expect(r.code, r.stderr).toBe(0);
    const forkId = JSON.parse(r.stdout).id as string;
    const fork = await waitForWorkflow(t, forkId);
    expect(fork.status, JSON.stringify(fork.error)).toBe('completed');
    expect(fork.output).toEqual({ published: 5 });
    expect(fork).toMatchObject({ forked_from: src, fork_step: 'double', name: 'report', created_by: 'alice' });
    const steps = await getSteps(t, forkId);
    expect(steps.map((s) => [s.name, s.status])).toEqual([['fetch', 'done'], ['double', 'done'], ['publish', 'done']]);
    expect(steps[0]!.result).toEqual({ rows: 5 });
    // The source is untouched.
    expect((await getWorkflow(t, src)).output).toEqual({ published: 2 });

    // Without --from: the whole flow again, with a new input.
    const again = await runCli(['fork', src, '--input', '{"rows": 9}', '--json'], { env: envFor(t) });
    expect(again.code, again.stderr).toBe(0);
    expect((await waitForWorkflow(t, JSON.parse(again.stdout).id)).output).toEqual({ published: 9 });
  });

  it('forks a failed workflow from the step that decided, with the earlier value corrected, and it completes', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: 'check',
      steps: {
        check: { tool: 'core.echo', args: { ok: '{{input.ok}}' }, next: 'decide' },
        decide: { tool: 'core.echo', args: { ok: '{{steps.check.result.ok}}' }, branch: [{ if: 'result.ok == true', then: 'fine' }, { if: 'result.ok == false', then: 'boom' }] },
        boom: { tool: 'core.fail', args: { message: 'not ok' }, done: true },
        fine: { tool: 'core.echo', args: { fine: true }, done: true, output: '{{result}}' },
      },
    };
    const src = await insertWorkflow(t, flow, { ok: false }, { name: 'checked' });
    expect((await waitForWorkflow(t, src)).status).toBe('failed');
    const r = await runCli(['fork', src, '--from', 'decide', '--result', 'check={"ok": true}', '--follow'], { env: envFor(t) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/running from decide/);
    const [fork] = await t.q(`SELECT id, status, output FROM stepd.workflows WHERE forked_from = $1`, [src]);
    expect(fork).toMatchObject({ status: 'completed', output: { fine: true } });
    expect((await getWorkflow(t, src)).status).toBe('failed');
  });

  it('copies a settled fan-out before the step (its branch rows linked to the copied fork row) and runs on from there', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.items}}', step: 'summarize' }, join: 'report' },
        summarize: { tool: 'core.echo', args: { summary: 'summary of {{item}}' } },
        report: { tool: 'core.echo', args: { summaries: '{{results}}' }, next: 'final' },
        final: { tool: 'core.echo', args: { n: '{{steps.report.result.summaries}}' }, done: true, output: '{{result}}' },
      },
    };
    const src = await insertWorkflow(t, flow, { items: ['a', 'b'] });
    const done = await waitForWorkflow(t, src);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    const r = await runCli(['fork', src, '--from', 'final', '--json'], { env: envFor(t) });
    expect(r.code, r.stderr).toBe(0);
    const forkId = JSON.parse(r.stdout).id as string;
    const fork = await waitForWorkflow(t, forkId);
    expect(fork.status, JSON.stringify(fork.error)).toBe('completed');
    expect(fork.output).toEqual(done.output);
    const rows = await getSteps(t, forkId);
    const forkRow = rows.find((s) => s.name === 'each')!;
    expect(rows.filter((s) => s.name === 'summarize').map((s) => [s.fanout_id, s.item_index])).toEqual([[forkRow.id, 0], [forkRow.id, 1]]);
    expect((await getSteps(t, src)).map((s) => s.name)).toEqual(rows.map((s) => s.name));
    // A step that ran only inside the fan-out is no place to fork from (the database says so).
    await expect(t.q(`SELECT stepd.fork_workflow($1, 'summarize')`, [src])).rejects.toThrow(/never ran at the top level/);
  });

  it('refuses a step that never ran, a result for a later step, and a bad --result', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const src = await insertWorkflow(t, CHAIN, { rows: 1 });
    await waitForWorkflow(t, src);
    const env = envFor(t);
    const never = await runCli(['fork', src, '--from', 'nope'], { env });
    expect(never.code).toBe(1);
    expect(never.stderr).toMatch(/step "nope" is not in the flow/);
    const later = await runCli(['fork', src, '--from', 'double', '--result', 'publish={}'], { env });
    expect(later.code).toBe(1);
    expect(later.stderr).toMatch(/did not finish before step/);
    const join = await insertWorkflow(t, { start: 'each', steps: { each: { forEach: { items: [1, 2], step: 'one' }, join: 'all' }, one: { tool: 'core.echo', args: { n: '{{item}}' } }, all: { tool: 'core.echo', args: { r: '{{results}}' }, done: true } } });
    await waitForWorkflow(t, join);
    const fromJoin = await runCli(['fork', join, '--from', 'all'], { env });
    expect(fromJoin.code).toBe(1);
    expect(fromJoin.stderr).toMatch(/is the join of fan-out "each", which gives it its results: fork from "each" instead/);
    const bad = await runCli(['fork', src, '--from', 'double', '--result', 'fetch'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/STEP=JSON/);
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.workflows`))[0].n).toBe(2);
  });
});

describe('stepd cancel|retry by filter', () => {
  it('--dry-run lists what would change; then one statement cancels exactly those', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    const mine = [await insertWorkflow(t, GATE, {}, { name: 'nightly', user: 'alice' }), await insertWorkflow(t, GATE, {}, { name: 'nightly', user: 'bob' })];
    const other = await insertWorkflow(t, GATE, {}, { name: 'hourly', user: 'alice' });
    for (const id of [...mine, other]) await waitForStep(t, id, 'wait', 'pending');

    const dry = await runCli(['cancel', '--name', 'nightly', '--dry-run', '--json'], { env });
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout).workflows.map((w: { workflowId: string }) => w.workflowId)).toEqual(mine);
    for (const id of mine) expect((await getWorkflow(t, id)).status).toBe('running');

    const byUser = await runCli(['cancel', '--name', 'nightly', '--user', 'bob'], { env });
    expect(byUser.code, byUser.stderr).toBe(0);
    expect(byUser.stdout).toMatch(/1 workflow\(s\) cancelled/);
    expect((await getWorkflow(t, mine[1]!)).status).toBe('cancelled');
    expect((await getWorkflow(t, mine[0]!)).status).toBe('running');
    expect((await getWorkflow(t, other)).status).toBe('running');

    const none = await runCli(['cancel'], { env });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/give a workflow id, or filter options/);
    const wrong = await runCli(['cancel', '--status', 'failed'], { env });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/status must be new or running/);
  });

  it('retry --name redrives every failed workflow of that name', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    const ids = [await insertWorkflow(t, FAILS, {}, { name: 'flaky' }), await insertWorkflow(t, FAILS, {}, { name: 'flaky' })];
    for (const id of ids) await waitForWorkflow(t, id);
    const dry = await runCli(['retry', '--name', 'flaky', '--dry-run'], { env });
    expect(dry.stdout).toMatch(/2 workflow\(s\) would be retried/);
    const r = await runCli(['retry', '--name', 'flaky', '--json'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).workflows).toHaveLength(2);
    for (const id of ids) {
      const wf = await waitForWorkflow(t, id, ['failed'], 20_000);
      await expect.poll(async () => (await getWorkflow(t, id)).redrives, { timeout: 20_000 }).toBe(1);
      expect(wf.status).toBe('failed');
    }
  });
});

describe('stepd prune', () => {
  it('lists with --dry-run, deletes finished workflows with their steps, keeps live ones and those the filters leave out', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    const done = [await insertWorkflow(t, CHAIN, { rows: 1 }, { name: 'report' }), await insertWorkflow(t, CHAIN, { rows: 1 }, { name: 'other' })];
    for (const id of done) await waitForWorkflow(t, id);
    const live = await insertWorkflow(t, GATE, {}, { name: 'report' });
    await waitForStep(t, live, 'wait', 'pending');

    const dry = await runCli(['prune', '--completed', '0s', '--cancelled', '0s', '--dry-run'], { env });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(new RegExp(`would delete workflow ${done[0]} \\(report, completed .*3 step row`));
    expect(dry.stdout).toMatch(/dry run: 2 workflow\(s\) would be deleted/);
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.workflows`))[0].n).toBe(3);

    const named = await runCli(['prune', '--completed', '0s', '--name', 'report'], { env });
    expect(named.code, named.stderr).toBe(0);
    expect(named.stdout).toMatch(/deleted 1 workflow\(s\) \(1 completed/);
    const left = await t.q<{ id: string }>(`SELECT id FROM stepd.workflows ORDER BY id`);
    expect(left.map((r) => r.id)).toEqual([done[1], live]);
    expect(await getSteps(t, done[0]!)).toEqual([]);

    // A parent goes with its sub-workflows; signals (trusted roles only: this is the superuser) by age.
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('child', $1)`, [JSON.stringify(CHAIN)]);
    const parent = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'child', input: { rows: 1 } }, done: true } } }, {}, { name: 'parent' });
    expect((await waitForWorkflow(t, parent)).status).toBe('completed');
    await t.q(`INSERT INTO stepd.signals (name) VALUES ('old.news')`);
    const tree = await runCli(['prune', '--completed', '0s', '--name', 'parent'], { env });
    expect(tree.code, tree.stderr).toBe(0);
    expect(tree.stdout).toMatch(/deleted 1 workflow\(s\) \(1 completed\)/);
    expect(await t.q(`SELECT id FROM stepd.workflows WHERE id = $1 OR parent_id = $1`, [parent])).toEqual([]);
    const signals = await runCli(['prune', '--signals', '0s'], { env });
    expect(signals.stdout).toMatch(/deleted 0 workflow\(s\) \(none\) and 1 signal\(s\)/);
    expect(await t.q(`SELECT id FROM stepd.signals`)).toEqual([]);

    const kept = await runCli(['prune', '--completed', '1d'], { env });
    expect(kept.stdout).toMatch(/deleted 0 workflow/);
    const none = await runCli(['prune'], { env });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/nothing to prune/);
  });
});
