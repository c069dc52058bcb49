/**
 * The SQL worker contract (sql/0027) against a real executor: a worker role that may call the
 * five functions only serves `billing.*` steps of a workflow that mixes them with executor tools.
 */
import { describe, expect, it } from 'vitest';
import { asExecutor, createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { connectAs } from './workerHelpers.js';
import { envFor, runCli } from '../cli/helpers.js';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { createLimitPolicy } from '../../src/tools/limits.js';

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

/** A pool connected as a fresh LOGIN role granted `<schema>_worker`. */
const workerPool = (t: TestSchema) => connectAs(t, `${t.schema}_worker`);

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
    // The step started when the worker took it (not when its report was recorded).
    const charge = (await getSteps(t, id)).find((s) => s.name === 'charge')!;
    const [taken] = await t.q<{ task_taken_at: Date }>(`SELECT task_taken_at FROM stepd.workflow_steps WHERE id = $1`, [charge.id]);
    expect(charge.started_at).toEqual(taken!.task_taken_at);
    expect(charge.progress).toEqual({ progress: 1, total: 2 });
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
    // Not a gate: `stepd approve` refuses it, and `stepd status` shows it with the workers.
    const approve = await runCli(['approve', task.step_id], { env: envFor(t) });
    expect(approve.code).not.toBe(0);
    expect(approve.stderr).toMatch(/not a gate: it waits for a worker serving billing\.charge/);
    const status = await runCli(['status', id], { env: envFor(t) });
    expect(status.stdout).toMatch(/with the workers \(billing\.charge\)/);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    const [ext] = await w.q<{ extend_task: string }>(`SELECT stepd.extend_task($1, $2, interval '30 seconds')`, [task.step_id, task.token]);
    expect(ext!.extend_task).toBe('cancelled');
    const err = await refusal(w.q(`SELECT stepd.finish_task($1, $2, '{}')`, [task.step_id, task.token]));
    expect(err.detail).toBe('reason=cancelled');
  });

  it('the watchdog turns a lease that ran out into a lost attempt with no worker calling; past the deadline it is a timeout', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing', timeoutMs: 1_000 })] });
    const w = await workerPool(t);
    // The prefix's timeout (1 s) applies: the lease asked for (1 hour) stops at the deadline.
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, retry: { maxAttempts: 1 }, done: true } } });
    const task = await waitFor(async () => (await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '1 hour')`))[0], 'a task');
    expect(task.deadline.getTime() - Date.now()).toBeLessThanOrEqual(1_000);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'timeout' });
    // A flow's own timeout wins over the prefix's; a short lease with no extend_task is a lost attempt.
    const id2 = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, timeout: '1h', retry: { maxAttempts: 2, initial: '10ms' }, done: true } } });
    const t1 = await waitFor(async () => (await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '1 second')`))[0], 'a task');
    expect(t1.deadline.getTime() - Date.now()).toBeGreaterThan(50 * 60_000);
    const retried = await waitFor(async () => {
      const steps = await getSteps(t, id2);
      return steps.length === 2 && steps[1]!.status === 'pending' ? steps : undefined;
    }, 'the lost attempt to be retried');
    expect(retried[0]).toMatchObject({ status: 'failed', error: { code: 'lost', retryable: true } });
    const [ext] = await w.q<{ code: string }>(`SELECT stepd.extend_task($1, $2, interval '10 seconds')`, [t1.step_id, t1.token]).then(
      () => [{ code: 'accepted' }],
      (e: { code: string; detail?: string }) => [{ code: `${e.code} ${e.detail}` }],
    );
    expect(ext!.code).toBe('55000 reason=lost');
  });

  it('limits count the steps handed to workers: at most two billing steps with the workers at once', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })], limits: createLimitPolicy({ tools: { 'billing.*': 2 } }) });
    const w = await workerPool(t);
    const ids = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: { n }, done: true, output: '{{result}}' } } })));
    const handed = async () =>
      (await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE status = 'pending' AND task_timeout_ms IS NOT NULL`))[0]!.n;
    let served = 0;
    while (served < 6) {
      await waitFor(async () => (await handed()) === Math.min(2, 6 - served), `${Math.min(2, 6 - served)} steps with the workers`);
      expect(await handed()).toBeLessThanOrEqual(2);
      const [task] = await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '30 seconds')`);
      expect(task).toBeDefined();
      await w.q(`SELECT stepd.finish_task($1, $2, $3)`, [task!.step_id, task!.token, JSON.stringify({ served: task!.args })]);
      served++;
    }
    for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });

  it('a worker step takes no executor slot: it is handed out and recorded while the only slot is busy', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })], concurrency: 1 });
    const w = await workerPool(t);
    // One sleeper holds the slot, the other waits for it as the claim's prefetch: no claim has room.
    const sleeper = { start: 's', steps: { s: { tool: 'core.sleep', args: { ms: 60_000 }, timeout: '2m', done: true } } };
    const busy = await insertWorkflow(t, sleeper);
    const waiting = await insertWorkflow(t, sleeper);
    await waitFor(async () => (await getSteps(t, busy)).find((s) => s.status === 'running') && (await getSteps(t, waiting)).find((s) => s.status === 'running'), 'the slot and the prefetch to be taken');
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true, output: '{{result}}' } } });
    const task = await waitFor(async () => (await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '30 seconds')`))[0], 'a task');
    await w.q(`SELECT stepd.finish_task($1, $2, '{"ok": 1}')`, [task.step_id, task.token]);
    expect((await waitForWorkflow(t, id)).output).toEqual({ ok: 1 });
    expect((await getSteps(t, busy))[0]!.status).toBe('running');
  });

  it('takes fairly across workflows, wakes listeners on stepd_tasks, and a redriven worker step is served again', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const w = await workerPool(t);
    const listener = await w.pool.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query('LISTEN stepd_tasks');
    try {
      const fanout = { start: 'each', steps: { each: { forEach: { items: '{{input.list}}', step: 'c' }, join: 'j' }, c: { tool: 'billing.charge', args: { i: '{{item}}' } }, j: { tool: 'core.noop', done: true } } };
      const big = await insertWorkflow(t, fanout, { list: Array.from({ length: 100 }, (_, i) => i) });
      await waitFor(async () => (await t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'pending'`, [big]))[0].n === 100, 'the big fan-out to wait');
      const small = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: { small: true }, retry: { maxAttempts: 1 }, done: true, output: '{{result}}' } } });
      await waitFor(async () => (await t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'pending'`, [small]))[0].n === 1, 'the small one to wait');
      await waitFor(() => heard.some((p) => JSON.parse(p).tool === 'billing.charge' && JSON.parse(p).schema === t.schema), 'a stepd_tasks notification');
      // The small workflow's one task comes in the first batch, beside the big one's oldest.
      const batch = await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 5, interval '30 seconds')`);
      expect(batch).toHaveLength(5);
      expect(batch.map((b) => b.workflow_id)).toContain(small);
      const mine = batch.find((b) => b.workflow_id === small)!;
      await w.q(`SELECT stepd.fail_task($1, $2, '{"code": "declined", "message": "no", "retryable": true}')`, [mine.step_id, mine.token]);
      expect((await waitForWorkflow(t, small)).error).toMatchObject({ code: 'declined' });
      // Redrive: a new attempt is handed to the workers, with the step's idempotency key.
      await t.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1 AND status = 'failed'`, [small]);
      const again = await waitFor(async () => (await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.charge'], 200, interval '30 seconds')`)).find((b) => b.workflow_id === small), 'the redriven task');
      expect(again.attempt).toBe(2);
      expect(again.idempotency_key).toBe(mine.idempotency_key);
      await w.q(`SELECT stepd.finish_task($1, $2, '{"paid": true}')`, [again.step_id, again.token]);
      expect(await waitForWorkflow(t, small)).toMatchObject({ status: 'completed', output: { paid: true } });
    } finally {
      listener.release(true);
    }
  });

  it('a report an executor was recording when it went away is recorded by another, not lost', async () => {
    const t = await createTestSchema();
    const first = await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const w = await workerPool(t);
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true, output: '{{result}}' } } });
    const task = await waitFor(async () => (await w.q<Task>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '30 seconds')`))[0], 'a task');
    await first.stop({ graceMs: 0 });
    await w.q(`SELECT stepd.finish_task($1, $2, '{"charged": 1}')`, [task.step_id, task.token]);
    // An executor that claimed the report to record it, then vanished (its lease ran out, it is not alive).
    await asExecutor(t, `UPDATE stepd.workflow_steps SET status = 'running', executor_id = 'gone', started_at = now(), lease_until = now() - interval '1 second' WHERE id = $1 AND status = 'ready'`, [task.step_id]);
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { charged: 1 } });
    expect((await getSteps(t, id)).map((s) => [s.status, s.attempt])).toEqual([['done', 1]]);
  });
});
