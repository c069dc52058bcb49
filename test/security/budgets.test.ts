/**
 * Budgets and caps against a client's flows: a CEL comprehension bomb fails its own workflow with
 * a budget error while a one-step workflow beside it completes; a flow above each of the
 * operator's caps fails with `invalid_flow` or `cap_exceeded` naming the cap; cancelling a large
 * running fan-out works whatever is running.
 */
import { describe, expect, it } from 'vitest';
import type { CapsConfig } from '../../src/configFile.js';
import { clientInsert, getSteps, getWorkflow, securityEnv, waitFor, waitForWorkflow } from './helpers.js';

const TEN = '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]';
const items = (n: number) => Array.from({ length: n }, (_, i) => i);

/** `levels` nested `.all` comprehensions over `list`: 10^levels evaluations without a budget. */
function comprehensionBomb(list: string, levels: number): string {
  let expr = 'true';
  for (let i = levels - 1; i >= 0; i--) expr = `${list}.all(v${i}, ${expr})`;
  return expr;
}

function bombFlow(condition: string): unknown {
  return { start: 'a', steps: { a: { tool: 'core.noop', branch: [{ if: condition, then: 'b' }], default: 'b' }, b: { tool: 'core.noop', done: true } } };
}

const ONE_STEP = { start: 'a', steps: { a: { tool: 'core.echo', args: { beside: true }, done: true, output: '{{result}}' } } };

describe('CEL budgets', () => {
  it.each([
    { name: 'over literal lists', condition: comprehensionBomb(TEN, 8), input: {} },
    { name: 'over the input', condition: comprehensionBomb('input.l', 8), input: { l: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] } },
    // Shallow enough to pass every static check; only the evaluation budget can stop these.
    { name: 'three deep over a 500-item input', condition: comprehensionBomb('input.l', 3), input: { l: items(500) } },
    { name: 'building lists of lists', condition: 'size(input.l.map(a, input.l.map(b, input.l))) > 0', input: { l: items(500) } },
  ])('a comprehension bomb $name fails its own workflow with a budget error; a one-step workflow beside it completes', async ({ condition, input }) => {
    const env = await securityEnv();
    const bombs = [await clientInsert(env.client, bombFlow(condition), { input }), await clientInsert(env.client, bombFlow(condition), { input })];
    const beside = await clientInsert(env.client, ONE_STEP);
    const wf = await waitForWorkflow(env.t, beside);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ beside: true });
    for (const id of bombs) {
      const bomb = await waitForWorkflow(env.t, id);
      expect(bomb.status).toBe('failed');
      expect(['budget_exceeded', 'condition_error', 'invalid_flow']).toContain(bomb.error!.code);
      expect(JSON.stringify(bomb.error)).toMatch(/budget/i);
      expect((await getSteps(env.t, id)).map((s) => s.name)).not.toContain('b');
    }
    await env.bystander.assertUndisturbedAndServed();
  });
});

const BIG = 'x'.repeat(5_000);
const forEachFlow = (concurrency?: number) => ({
  start: 'each',
  steps: {
    each: { forEach: { items: '{{input.items}}', step: 'work', ...(concurrency ? { concurrency } : {}) }, join: 'end' },
    work: { tool: 'core.echo', args: { i: '{{item}}' } },
    end: { tool: 'core.noop', done: true },
  },
});

interface CapCase {
  cap: keyof CapsConfig;
  caps: CapsConfig;
  flow: unknown;
  input?: unknown;
  /** The most step rows the refused workflow may have made. */
  maxRows: number;
}

const CAP_CASES: CapCase[] = [
  { cap: 'steps', caps: { steps: 20 }, flow: { maxSteps: 1_000_000, start: 'a', steps: { a: { tool: 'core.noop', done: true } } }, maxRows: 0 },
  { cap: 'forEachItems', caps: { forEachItems: 10 }, flow: forEachFlow(), input: { items: items(50) }, maxRows: 1 },
  { cap: 'forEachConcurrency', caps: { forEachConcurrency: 4 }, flow: forEachFlow(50), input: { items: items(5) }, maxRows: 0 },
  { cap: 'resultBytes', caps: { resultBytes: 1_000 }, flow: { start: 'a', steps: { a: { tool: 'core.echo', args: { blob: BIG }, done: true } } }, maxRows: 1 },
  {
    cap: 'outputBytes',
    caps: { outputBytes: 1_000 },
    flow: { start: 'a', steps: { a: { tool: 'core.echo', args: { blob: BIG }, done: true, output: '{{result}}' } } },
    maxRows: 1,
  },
];

describe("the operator's caps", () => {
  it.each(CAP_CASES)('a flow over caps.$cap fails naming the cap, and nothing else is disturbed', async ({ cap, caps, flow, input, maxRows }) => {
    const env = await securityEnv({ config: { caps } });
    const id = await clientInsert(env.client, flow, { input: input ?? {} });
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status).toBe('failed');
    expect(['invalid_flow', 'cap_exceeded']).toContain(wf.error!.code);
    expect(JSON.stringify(wf.error)).toContain(cap);
    expect((await getSteps(env.t, id)).length).toBeLessThanOrEqual(maxRows);
    expect(wf.output).toBeNull();
    await env.bystander.assertUndisturbedAndServed();
  });

  it('an input over caps.inputBytes is refused by the database at INSERT naming the cap (sql/0021), and nothing else is disturbed', async () => {
    const env = await securityEnv({ config: { caps: { inputBytes: 1_000 } } });
    const err = await clientInsert(env.client, ONE_STEP, { input: { blob: BIG } }).then(
      () => undefined,
      (e: { code?: string; message: string }) => e,
    );
    expect(err).toMatchObject({ code: '54000', message: expect.stringContaining('caps.inputBytes (1000 bytes)') });
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE name = 'attack'`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a loop that declares no maxSteps stops at caps.steps', async () => {
    const env = await securityEnv({ config: { caps: { steps: 20 } } });
    const id = await clientInsert(env.client, { start: 'a', steps: { a: { tool: 'core.noop', next: 'a' } } });
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status).toBe('failed');
    expect(['step_limit', 'cap_exceeded']).toContain(wf.error!.code);
    expect((await getSteps(env.t, id)).length).toBeLessThanOrEqual(20);
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('fair claims', () => {
  it('a one-step workflow is served while a 5,000-item fan-out keeps 1,000 steps ready: at most a round of the big one starts first', async () => {
    const env = await securityEnv({ options: { concurrency: 64 } });
    const big = await clientInsert(
      env.client,
      {
        maxSteps: 6_000,
        start: 'each',
        steps: { each: { forEach: { items: '{{input.items}}', step: 'work', concurrency: 1_000 }, join: 'end' }, work: { tool: 'core.sleep', args: { ms: 20 } }, end: { tool: 'core.noop', done: true } },
      },
      { input: { items: items(5_000) } },
    );
    await waitFor(async () => {
      const [row] = await env.t.q(`SELECT count(*) FILTER (WHERE status = 'ready')::int AS ready, count(*) FILTER (WHERE status = 'done')::int AS done FROM stepd.workflow_steps WHERE workflow_id = $1`, [big]);
      return row.ready >= 500 && row.done >= 200;
    }, 'the fan-out to hold hundreds of ready steps');
    const small = await clientInsert(env.client, ONE_STEP);
    expect((await waitForWorkflow(env.t, small)).status).toBe('completed');
    expect((await getWorkflow(env.t, big)).status).toBe('running');
    const [step] = await getSteps(env.t, small);
    const [{ n }] = await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND started_at > $2 AND started_at < $3`, [
      big,
      step!.ready_at,
      step!.started_at,
    ]);
    // Oldest-first claims would start every ready step queued ahead of it (hundreds) first.
    expect(n).toBeLessThan(200);
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [big]);
    await env.bystander.assertUndisturbedAndServed();
  });
});

const FANOUT_FLOW = {
  maxSteps: 3_000,
  start: 'each',
  steps: {
    each: { forEach: { items: '{{input.items}}', step: 'work', concurrency: 50 }, join: 'end' },
    work: { tool: 'core.sleep', args: { ms: 20 } },
    end: { tool: 'core.noop', done: true },
  },
};

describe('cancelling a large running fan-out', () => {
  async function startFanout() {
    const env = await securityEnv({ options: { concurrency: 64 } });
    const id = await clientInsert(env.client, FANOUT_FLOW, { input: { items: items(2_000) } });
    await waitFor(async () => {
      const [row] = await env.t.q(`SELECT count(*) FILTER (WHERE status = 'done')::int AS done FROM stepd.workflow_steps WHERE workflow_id = $1`, [id]);
      return row.done >= 100;
    }, 'the fan-out to be well under way');
    return { env, id };
  }

  async function expectCancelledForGood(env: Awaited<ReturnType<typeof startFanout>>['env'], id: string): Promise<void> {
    expect(await getWorkflow(env.t, id)).toMatchObject({ status: 'cancelled', cancelled_at: expect.any(Date) });
    const live = () => env.t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND status IN ('pending', 'ready', 'running')`, [id]);
    expect(await live()).toEqual([{ n: 0 }]);
    const rows = await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1`, [id]);
    await env.bystander.assertUndisturbedAndServed();
    // Nothing was started for it afterwards.
    expect(await live()).toEqual([{ n: 0 }]);
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1`, [id])).toEqual(rows);
    expect((await getSteps(env.t, id)).filter((s) => s.name === 'end')).toEqual([]);
  }

  it('a client cancels a 2,000-item forEach while 50 of its steps run', async () => {
    const { env, id } = await startFanout();
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    await expectCancelledForGood(env, id);
  });

  it('a cancel whose transaction began before later claims still succeeds', async () => {
    // The cascade used to write completed_at = now() (the transaction's start), earlier than the
    // started_at of steps claimed meanwhile: workflow_steps_completed_after_started refused it.
    const { env, id } = await startFanout();
    await env.client.session(async (run) => {
      await run('BEGIN');
      const [{ began }] = await run(`SELECT now() AS began`);
      await waitFor(async () => {
        const [row] = await env.t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND started_at > $2`, [id, began]);
        return row.n > 0;
      }, 'a step claimed after the cancelling transaction began');
      await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
      await run('COMMIT');
    });
    await expectCancelledForGood(env, id);
  });
});
