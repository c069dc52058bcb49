/**
 * Settling M nested forks costs O(M) statements, not O(M²): the innermost branch finishing
 * settles every enclosing fan-out in one transaction, and that transaction's statement count
 * grows linearly with the depth. Statements are counted on the pg client, never timed.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

/** Every executor transaction: its statements, from BEGIN to COMMIT/ROLLBACK. */
interface Recorded {
  statements: string[];
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
    if (head === 'BEGIN') open.set(this, { statements: [] });
    else if (head === 'COMMIT' || head === 'ROLLBACK') {
      const rec = open.get(this);
      if (rec) transactions.push(rec);
      open.delete(this);
    } else open.get(this)?.statements.push(text);
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
