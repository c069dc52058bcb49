/**
 * The redrive plan as a pure function of flow, step rows and error: which rows run again, which
 * fan-outs reopen, and what is refused — no database.
 */
import { describe, expect, it } from 'vitest';
import type { RedriveStepRow } from '../../src/db/queries.js';
import { planRedrive } from '../../src/executor/transitions/redrivePlan.js';
import { compileFlow } from '../../src/flow/validate.js';

function flowOf(raw: unknown) {
  const c = compileFlow(raw);
  if (!c.ok) throw new Error(JSON.stringify(c.issues));
  return c.flow;
}

let next = 1;
function row(name: string, status: RedriveStepRow['status'], extra: Partial<RedriveStepRow> = {}): RedriveStepRow {
  return {
    id: String(next++),
    name,
    status,
    attempt: 1,
    args: {},
    result: null,
    fanout_id: null,
    item_index: null,
    fanout_open: false,
    first_attempt_id: null,
    executor_id: 'x',
    ready_at: null,
    ...extra,
  };
}

const summary = (plan: ReturnType<typeof planRedrive>) =>
  plan.ok ? { reopen: plan.reopen, actions: plan.actions.map((a) => (a.kind === 'create' ? `create ${a.name}` : `${a.kind} ${a.row.name}#${a.row.id}`)) } : plan;

describe('planRedrive', () => {
  const chain = flowOf({ start: 'a', steps: { a: { tool: 'core.echo', next: 'b' }, b: { tool: 'core.echo', next: 'c' }, c: { tool: 'core.echo' } } });

  it('gives the last failed attempt of a chain a new attempt and leaves done steps alone', () => {
    next = 1;
    const rows = [row('a', 'done'), row('b', 'failed'), row('b', 'failed', { attempt: 2, first_attempt_id: '2' })];
    expect(summary(planRedrive(chain, rows, { code: 'x', message: 'x', step: 'b' }))).toEqual({ reopen: [], actions: ['attempt b#3'] });
  });

  it('creates again a step that failed as it was created (no executor, no arguments)', () => {
    next = 1;
    const rows = [row('a', 'done'), row('b', 'failed', { args: null, executor_id: null })];
    expect(summary(planRedrive(chain, rows, { code: 'template', message: 'x', step: 'b' }))).toEqual({ reopen: [], actions: ['create b'] });
  });

  it('in a forEach, re-runs failed and cancelled items only; an open fork is not touched', () => {
    next = 1;
    const flow = flowOf({ start: 'each', steps: { each: { forEach: { items: '{{input.xs}}', step: 'w' }, join: 'j' }, w: { tool: 'core.echo' }, j: { tool: 'core.echo' } } });
    const fork = row('each', 'done', { fanout_open: true, args: null, executor_id: null });
    const rows = [
      fork,
      row('w', 'done', { fanout_id: fork.id, item_index: 0 }),
      row('w', 'failed', { fanout_id: fork.id, item_index: 1 }),
      row('w', 'cancelled', { fanout_id: fork.id, item_index: 2 }),
      row('w', 'done', { fanout_id: fork.id, item_index: 3 }),
    ];
    expect(summary(planRedrive(flow, rows, { code: 'x', message: 'x', step: 'w' }))).toEqual({ reopen: [], actions: ['attempt w#3', 'attempt w#4'] });
  });

  it('reopens a nested fork that failed fast, and leaves a settled fan-out (its join exists) alone', () => {
    next = 1;
    const flow = flowOf({
      start: 'outer',
      steps: {
        outer: { parallel: ['p', 'inner'], join: 'end' },
        p: { parallel: ['p1'], join: 'pj' },
        p1: { tool: 'core.echo' },
        pj: { tool: 'core.echo' },
        inner: { parallel: ['x', 'y'], join: 'ij' },
        x: { tool: 'core.echo' },
        y: { tool: 'core.echo' },
        ij: { tool: 'core.echo' },
        end: { tool: 'core.echo' },
      },
    });
    const outer = row('outer', 'done', { fanout_open: true });
    const p = row('p', 'done', { fanout_id: outer.id, item_index: 0 });
    const inner = row('inner', 'failed', { fanout_id: outer.id, item_index: 1 });
    const p1 = row('p1', 'failed', { fanout_id: p.id, item_index: 0 });
    const pj = row('pj', 'cancelled', { fanout_id: outer.id, item_index: 0 });
    const x = row('x', 'done', { fanout_id: inner.id, item_index: 0 });
    const y = row('y', 'failed', { fanout_id: inner.id, item_index: 1 });
    // p settled (allSettled-like: its join pj exists), so p1's failure is not looked at.
    const plan = planRedrive(flow, [outer, p, inner, p1, pj, x, y], { code: 'x', message: 'x', step: 'y' });
    expect(summary(plan)).toEqual({ reopen: [inner.id], actions: [`attempt pj#${pj.id}`, `attempt y#${y.id}`] });
  });

  it('a failed fork whose failure an onError handled is not reopened', () => {
    next = 1;
    const flow = flowOf({
      start: 'f',
      steps: { f: { parallel: ['a'], join: 'j', onError: 'h' }, a: { tool: 'core.echo' }, j: { tool: 'core.echo' }, h: { tool: 'core.echo' } },
    });
    const f = row('f', 'failed');
    const rows = [f, row('a', 'failed', { fanout_id: f.id, item_index: 0 }), row('h', 'failed')];
    expect(summary(planRedrive(flow, rows, { code: 'x', message: 'x', step: 'h' }))).toEqual({ reopen: [], actions: ['attempt h#3'] });
  });

  it('runs a done step whose transition failed the workflow again on its result', () => {
    next = 1;
    const flow = flowOf({ start: 'a', steps: { a: { tool: 'core.echo', branch: [{ if: 'result == true', then: 'b' }] }, b: { tool: 'core.echo' } } });
    expect(summary(planRedrive(flow, [row('a', 'done')], { code: 'no_branch_matched', message: 'x', step: 'a' }))).toEqual({ reopen: [], actions: ['transition a#1'] });
  });

  it('ends the workflow again when its output was over the cap (the error names no step)', () => {
    next = 1;
    const error = { code: 'cap_exceeded', message: 'x', details: { cap: 'outputBytes', limit: 10 } };
    expect(summary(planRedrive(chain, [row('a', 'done'), row('b', 'done'), row('c', 'done')], error))).toEqual({ reopen: [], actions: ['transition c#3'] });
  });

  it('refuses what a redrive cannot change', () => {
    next = 1;
    expect(planRedrive(chain, [row('a', 'done')], { code: 'failed_by_flow', message: 'x', step: 'a' })).toMatchObject({ ok: false, reason: 'failed_by_flow' });
    expect(planRedrive(chain, [row('a', 'done')], { code: 'step_limit', message: 'x', step: 'b' })).toMatchObject({ ok: false, reason: 'step_limit' });
    expect(planRedrive(chain, [row('zzz', 'failed')], { code: 'x', message: 'x' })).toMatchObject({ ok: false, reason: 'unknown_step' });
    expect(planRedrive(chain, [], { code: 'permission_denied', message: 'x' })).toMatchObject({ ok: false, reason: 'nothing_to_redrive' });
  });
});
