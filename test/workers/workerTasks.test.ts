/**
 * The SQL worker contract (sql/0027) against a real executor: a worker role that may call the
 * five functions only serves `billing.*` steps of a workflow that mixes them with executor tools.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { createLoginRole } from '../security/helpers.js';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { randomBytes } from 'node:crypto';

interface Task {
  step_id: string;
  token: string;
  tool: string;
  args: Record<string, unknown>;
  workflow_id: string;
  attempt: number;
  user: string | null;
  idempotency_key: string;
  deadline: Date;
}

/** A pool connected as a fresh LOGIN role granted `<schema>_worker`; `stepd.` names the test schema. */
async function workerPool(t: TestSchema): Promise<{ q: <R = any>(text: string, values?: unknown[]) => Promise<R[]>; pool: pg.Pool }> {
  const { url } = await createLoginRole(t, `${t.schema}_worker`, `wrk_${randomBytes(5).toString('hex')}`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
  onCleanup(() => pool.end().catch(() => {}));
  return { pool, q: async (text, values) => (await pool.query(text.replaceAll('stepd.', `${t.schema}.`), values)).rows };
}

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string; detail?: string }> {
  const err = await p.then(() => undefined, (e: unknown) => e as { code: string; message: string; detail?: string });
  expect(err, 'expected a refusal').toBeDefined();
  return err!;
}

const MIXED = {
  start: 'quote',
  steps: {
    quote: { tool: 'core.echo', args: { amount: '{{input.amount}}', card: 'tok_1' }, next: 'charge' },
    charge: { tool: 'billing.charge', args: { amount: '{{steps.quote.result.amount}}', card: '{{steps.quote.result.card}}' }, next: 'receipt' },
    receipt: { tool: 'core.echo', args: { charged: '{{steps.charge.result.id}}' }, done: true, output: '{{result}}' },
  },
};

describe('the SQL worker contract', () => {
  it('a workflow mixing executor tools and a worker tool completes; args resolved from the frozen flow', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const w = await workerPool(t);
    const id = await insertWorkflow(t, MIXED, { amount: 1200 }, { user: 'james' });
    const [task] = await waitFor(async () => {
      const rows = await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 10, interval '30 seconds')`);
      return rows.length > 0 ? rows : undefined;
    }, 'a task to take');
    expect(task!.tool).toBe('billing.charge');
    expect(task!.args).toEqual({ amount: 1200, card: 'tok_1' });
    expect(task!.workflow_id).toBe(id);
    expect(task!.user).toBe('james');
    expect(task!.attempt).toBe(1);
    expect(task!.idempotency_key).toBe(`${id}:charge:${task!.step_id}`);
    expect(await w.q(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 10, interval '30 seconds')`)).toEqual([]);
    const [ext] = await w.q<{ extend_task: string }>(`SELECT stepd.extend_task($1, $2, interval '30 seconds')`, [task!.step_id, task!.token]);
    expect(ext!.extend_task).toBe('ok');
    await w.q(`SELECT stepd.progress_task($1, $2, '{"progress": 1, "total": 2}')`, [task!.step_id, task!.token]);
    await w.q(`SELECT stepd.finish_task($1, $2, '{"id": "ch_42"}')`, [task!.step_id, task!.token]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ charged: 'ch_42' });
    // A stale token (already finished) is refused and changes nothing.
    const before = await getSteps(t, id);
    const err = await refusal(w.q(`SELECT stepd.finish_task($1, $2, '{"id": "other"}')`, [task!.step_id, task!.token]));
    expect(err.code).toBe('55000');
    expect(err.detail).toBe('reason=ended');
    expect(await getSteps(t, id)).toEqual(before);
    // A forged token.
    const forged = await refusal(w.q(`SELECT stepd.finish_task($1, gen_random_uuid(), '{}')`, [task!.step_id]));
    expect(forged.code).toBe('55000');
    expect(forged.detail).toBe('reason=unknown');
  });

  it('fail_task routes through the step policy: not retryable fails the workflow with the worker code', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const w = await workerPool(t);
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } });
    const [task] = await waitFor(async () => {
      const rows = await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.charge'], 1, interval '30 seconds')`);
      return rows.length > 0 ? rows : undefined;
    }, 'a task');
    const bad = await refusal(w.q(`SELECT stepd.fail_task($1, $2, '"nope"')`, [task!.step_id, task!.token]));
    expect(bad.code).toBe('22023');
    await w.q(`SELECT stepd.fail_task($1, $2, '{"code": "card_declined", "message": "declined", "retryable": false}')`, [task!.step_id, task!.token]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'card_declined' });
  });

  it('a lease that runs out is a lost attempt, retaken with the same idempotency key; the stale token is refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const w = await workerPool(t);
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: { n: 1 }, retry: { maxAttempts: 3, initial: '10ms' }, done: true, output: '{{result}}' } } });
    const take = () => waitFor(async () => {
      const rows = await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '1 second')`);
      return rows.length > 0 ? rows[0] : undefined;
    }, 'a task');
    const first = await take();
    const second = await take();
    expect(second.step_id).not.toBe(first.step_id);
    expect(second.attempt).toBe(2);
    expect(second.idempotency_key).toBe(first.idempotency_key);
    const stale = await refusal(w.q(`SELECT stepd.finish_task($1, $2, '{"done": "twice"}')`, [first.step_id, first.token]));
    expect(stale.code).toBe('55000');
    expect(stale.detail).toBe('reason=lost');
    await w.q(`SELECT stepd.finish_task($1, $2, '{"done": "once"}')`, [second.step_id, second.token]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.output).toEqual({ done: 'once' });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.status, (s.error as { code?: string } | null)?.code ?? null])).toEqual([['failed', 'lost'], ['done', null]]);
  });

  it('a cancelled workflow answers cancelled to extend_task and refuses finish_task', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const w = await workerPool(t);
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } });
    const task = await waitFor(async () => (await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '30 seconds')`))[0], 'a task');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    const [ext] = await w.q<{ extend_task: string }>(`SELECT stepd.extend_task($1, $2, interval '30 seconds')`, [task.step_id, task.token]);
    expect(ext!.extend_task).toBe('cancelled');
    const err = await refusal(w.q(`SELECT stepd.finish_task($1, $2, '{}')`, [task.step_id, task.token]));
    expect(err.detail).toBe('reason=cancelled');
  });
});
