/**
 * Settling M nested forks costs O(M) statements, not O(M²): the innermost branch finishing
 * settles every enclosing fan-out in one transaction, and that transaction's statement count
 * grows linearly with the depth. Statements are counted on the pg client, never timed.
 */
import pg from 'pg';
import { HEAVY_OUTCOME_STATEMENTS } from '../../src/executor/outcomes/transactions.js';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { holdTools } from '../helpers/holdTools.js';

/** Every executor transaction: its statements, from BEGIN to COMMIT/ROLLBACK. */
interface Recorded {
  statements: string[];
  /** Step ids named in the statement that locks the workflows and finishes steps. */
  finishing: string[];
  committed: boolean;
}

/** Wraps pg.Client#query for this test: records the statements of each transaction. */
function countTransactions(): { transactions: Recorded[]; reset: () => void } {
  const transactions: Recorded[] = [];
  const open = new WeakMap<object, Recorded>();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: object, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : ((first as { text?: string } | null)?.text ?? '');
    const head = text.trim().toUpperCase();
    // The executor's batch transactions begin with their planner settings in the same round trip.
    if (head === 'BEGIN' || head.startsWith('BEGIN;')) open.set(this, { statements: [], finishing: [], committed: false });
    else if (head === 'COMMIT' || head === 'ROLLBACK') {
      const rec = open.get(this);
      if (rec) transactions.push({ ...rec, committed: head === 'COMMIT' });
      open.delete(this);
    } else {
      const rec = open.get(this);
      rec?.statements.push(text);
      const name = (first as { name?: string } | null)?.name ?? '';
      const values = (first as { values?: unknown[] } | null)?.values;
      // The outcomes travel as one JSON array of {id, status, …}.
      if (rec && name.startsWith('stepd_lock_workflows_and_finish_steps') && typeof values?.[2] === 'string') {
        rec.finishing.push(...(JSON.parse(values[2]) as { id: string }[]).map((o) => o.id));
      }
    }
    return original.apply(this, args);
  };
  onCleanup(async () => {
    proto.query = original;
  });
  return { transactions, reset: () => void transactions.splice(0, transactions.length) };
}

/**
 * M nested parallel forks f0 … f(M-1), without joins: fork k has a branch s_k (a tool step, with
 * `twoBranches`) and the branch f(k+1); the innermost fork's only branch is the gate `hold`.
 */
function nestedForks(m: number, twoBranches: boolean): { start: string; steps: Record<string, unknown> } {
  const steps: Record<string, unknown> = {};
  for (let k = 0; k < m; k++) {
    const inner = k === m - 1 ? 'hold' : `f${k + 1}`;
    steps[`f${k}`] = { parallel: twoBranches ? [`s${k}`, inner] : [inner] };
    if (twoBranches) steps[`s${k}`] = { tool: 'core.echo', args: { k } };
  }
  steps.hold = { approval: true };
  return { start: 'f0', steps };
}

/** What the workflow's output must be: each level's results, nested. */
function expectedOutput(m: number, twoBranches: boolean): unknown {
  let value: unknown = { hold: { approved: true } };
  for (let k = m - 1; k >= 0; k--) {
    const inner = k === m - 1 ? value : { [`f${k + 1}`]: value };
    value = twoBranches ? { [`s${k}`]: { k }, ...(inner as object) } : inner;
  }
  return value;
}

/** Runs M nested forks to the gate, approves it and returns the settling transaction's statements. */
async function settleStatements(t: TestSchema, counter: ReturnType<typeof countTransactions>, m: number, twoBranches: boolean): Promise<string[]> {
  const id = await insertWorkflow(t, nestedForks(m, twoBranches));
  const gate = await waitForStep(t, id, 'hold', 'pending');
  if (twoBranches) {
    await waitFor(async () => (await getSteps(t, id)).filter((s) => s.name.startsWith('s') && s.status === 'done').length === m, `${m} side branches done`);
  }
  counter.reset();
  await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
  const wf = await waitForWorkflow(t, id);
  expect(wf.status).toBe('completed');
  expect(wf.output).toEqual(expectedOutput(m, twoBranches));
  // The gate's outcome settles every level in one transaction: the largest since the approval.
  const settle = counter.transactions.reduce<Recorded | undefined>((a, r) => (!a || r.statements.length > a.statements.length ? r : a), undefined);
  expect(settle, 'the settling transaction').toBeDefined();
  return settle!.statements;
}

describe('settling nested forks', () => {
  for (const twoBranches of [false, true]) {
    it(`costs statements linear in the depth (${twoBranches ? 'two branches' : 'one branch'} per fork)`, async () => {
      const t = await createTestSchema();
      await startExecutor(t);
      const counter = countTransactions();
      const counts = new Map<number, number>();
      for (const m of [10, 20, 40]) counts.set(m, (await settleStatements(t, counter, m, twoBranches)).length);
      const [c10, c20, c40] = [counts.get(10)!, counts.get(20)!, counts.get(40)!];
      // Linear: doubling the depth at most about doubles the statements (plus a constant).
      expect(c40, `statements for 10/20/40 levels: ${c10}/${c20}/${c40}`).toBeLessThanOrEqual(2.5 * c20);
      expect(c20).toBeLessThanOrEqual(2.5 * c10);
      // And O(1) statements per level settled.
      expect(c40 - c20).toBeLessThanOrEqual(20 * 4);
    });
  }

  it('reads nested forks that settled earlier in one statement when the outermost one settles', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const counter = countTransactions();
    const counts: number[] = [];
    for (const m of [10, 40]) {
      // f0 waits for its gate; f1 … f(m-1) (one branch each) settle as soon as the leaf is done.
      const steps: Record<string, unknown> = { f0: { parallel: ['gate', 'f1'] }, gate: { approval: true }, leaf: { tool: 'core.echo', args: { m } } };
      for (let k = 1; k < m; k++) steps[`f${k}`] = { parallel: [k === m - 1 ? 'leaf' : `f${k + 1}`] };
      const id = await insertWorkflow(t, { start: 'f0', steps });
      const gate = await waitForStep(t, id, 'gate', 'pending');
      await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1 AND fanout_open`, [id])).length === 1, 'inner forks settled');
      counter.reset();
      await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
      const wf = await waitForWorkflow(t, id);
      let inner: unknown = { leaf: { m } };
      for (let k = m - 1; k >= 2; k--) inner = { [`f${k}`]: inner };
      expect(wf.output).toEqual({ gate: { approved: true }, f1: inner });
      counts.push(Math.max(...counter.transactions.map((r) => r.statements.length)));
    }
    // The depth below does not change the statements of the outermost settle.
    expect(counts[1], `statements at depth 10/40: ${counts.join('/')}`).toBe(counts[0]);
  });
});

describe('a branch failing deep inside nested failFast forks', () => {
  it('fails every fork on the way up and cancels their live branches in statements independent of the depth', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const counter = countTransactions();
    const counts: number[] = [];
    for (const m of [10, 40]) {
      // Fork k waits for its gate s_k and for fork k+1; the innermost branch fails; f0 has onError.
      const steps: Record<string, unknown> = { boom: { tool: 'core.fail', args: { message: 'deep failure', code: 'deep' } } };
      steps.recover = { tool: 'core.echo', args: { why: '{{error.message}}', at: '{{error.step}}' } };
      for (let k = 0; k < m; k++) {
        steps[`f${k}`] = { parallel: [`s${k}`, k === m - 1 ? 'boom' : `f${k + 1}`], join: `j${k}`, ...(k === 0 ? { onError: 'recover' } : {}) };
        steps[`s${k}`] = { approval: true };
        steps[`j${k}`] = { tool: 'core.noop' };
      }
      counter.reset();
      const id = await insertWorkflow(t, { start: 'f0', steps });
      const wf = await waitForWorkflow(t, id);
      expect(wf.output).toEqual({ why: 'deep failure', at: 'boom' });
      const rows = await getSteps(t, id);
      expect(rows.filter((r) => /^f\d+$/.test(r.name)).map((r) => r.status)).toEqual(Array(m).fill('failed'));
      expect(rows.filter((r) => /^s\d+$/.test(r.name)).map((r) => r.status)).toEqual(Array(m).fill('cancelled'));
      expect(rows.filter((r) => /^j\d+$/.test(r.name))).toHaveLength(0);
      const failing = counter.transactions.find((r) => r.committed && r.statements.some((x) => /status = 'failed', error = \$2::jsonb, fanout_open = false/.test(x)));
      counts.push(failing!.statements.length);
    }
    expect(counts[1], `statements at depth 10/40: ${counts.join('/')}`).toBe(counts[0]);
  });
});

/**
 * Nested forks whose innermost branch is a held tool call: settling them is heavy. The outermost
 * joins into a step that reports only the innermost value (the nesting of the results is deeper
 * than an output may be).
 */
function heavyFlow(m: number) {
  const flow = nestedForks(m, false);
  flow.steps.hold = { tool: 'hold.wait', args: { approved: true } };
  flow.steps.f0 = { ...(flow.steps.f0 as object), join: 'end' };
  flow.steps.end = { tool: 'core.echo', args: { innermost: `{{steps.hold.result}}` } };
  return flow;
}
const heavyOutput = { innermost: { approved: true } };

const simpleFlow = { start: 'x', steps: { x: { tool: 'core.echo', args: { v: 1 } }, y: { tool: 'core.echo', args: { v: 2 } } } };
simpleFlow.steps.x = { ...simpleFlow.steps.x, next: 'y' } as typeof simpleFlow.steps.x;

describe('one heavy or blocked workflow among the outcomes', () => {
  const depth = Math.ceil(HEAVY_OUTCOME_STATEMENTS / 2);

  it('settles in a transaction of its own: the other outcomes of its batch commit without it', async () => {
    const t = await createTestSchema();
    const tools = holdTools();
    await startExecutor(t, { tools: [tools] });
    const counter = countTransactions();
    const heavy = await insertWorkflow(t, heavyFlow(depth));
    const simple = await insertWorkflow(t, { start: 'x', steps: { x: { tool: 'hold.wait', args: { v: 1 } } } });
    await waitFor(() => tools.waiting.size === 2, 'both held calls in flight');
    const [heavyStep] = await t.q<{ id: string }>(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'hold'`, [heavy]);
    const [simpleStep] = await t.q<{ id: string }>(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'x'`, [simple]);
    counter.reset();
    // Both outcomes arrive in the same tick, so they are taken in one batch.
    tools.release(heavy, simple);
    const hw = await waitForWorkflow(t, heavy);
    expect(hw.error).toBeNull();
    expect(hw.output).toEqual(heavyOutput);
    expect((await waitForWorkflow(t, simple)).status).toBe('completed');
    const txs = counter.transactions;
    expect(txs.some((r) => !r.committed && r.finishing.includes(heavyStep!.id) && r.finishing.includes(simpleStep!.id)), 'one batch tried both').toBe(true);
    const simpleCommit = txs.find((r) => r.committed && r.finishing.includes(simpleStep!.id));
    const heavyCommit = txs.find((r) => r.committed && r.finishing.includes(heavyStep!.id));
    expect(simpleCommit!.finishing).not.toContain(heavyStep!.id);
    expect(simpleCommit!.statements.length).toBeLessThan(HEAVY_OUTCOME_STATEMENTS);
    expect(heavyCommit!.finishing).toEqual([heavyStep!.id]);
    expect(heavyCommit!.statements.length).toBeGreaterThan(HEAVY_OUTCOME_STATEMENTS);
  });

  it('while its transaction waits, the outcomes of other workflows are still recorded', async () => {
    const t = await createTestSchema();
    const tools = holdTools();
    await startExecutor(t, { tools: [tools] });
    const heavy = await insertWorkflow(t, heavyFlow(depth));
    await waitFor(() => tools.waiting.has(heavy), 'the held call in flight');
    // Another transaction holds the heavy workflow's row (as a long settle of it would).
    const holder = await t.db.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${t.schema}.workflows WHERE id = $1 FOR UPDATE`, [heavy]);
      const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const pid = rows[0]!.pid;
      tools.release(heavy);
      await waitFor(
        async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [pid])).length > 0,
        'the heavy outcome to wait for the workflow lock',
      );
      const simple = await insertWorkflow(t, simpleFlow);
      expect((await waitForWorkflow(t, simple)).status).toBe('completed');
      // The heavy outcome is not recorded yet: its step is still running.
      expect((await t.q(`SELECT status FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'hold'`, [heavy]))[0].status).toBe('running');
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect((await waitForWorkflow(t, heavy)).output).toEqual(heavyOutput);
  });
});
