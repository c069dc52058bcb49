/**
 * The worker SDK (`stepd/worker`) in real worker processes (fixtures/sdkWorker.mjs), connected as
 * a role granted `<schema>_worker` only, beside an executor that hands `billing.*` steps to them.
 */
import { describe, expect, it } from 'vitest';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { spawnWorker, workerRoleUrl, type WorkerProcess } from './helpers.js';

const billing = () => [new WorkerToolProvider({ prefix: 'billing' })];

const MIXED = {
  start: 'quote',
  steps: {
    quote: { tool: 'core.echo', args: { amount: '{{input.amount}}' }, next: 'charge' },
    charge: { tool: 'billing.charge', args: { amount: '{{steps.quote.result.amount}}' }, next: 'receipt' },
    receipt: { tool: 'core.echo', args: { charged: '{{steps.charge.result.id}}', user: '{{steps.charge.result.user}}' }, done: true, output: '{{result}}' },
  },
};

/**
 * Five tasks of `ids` taken by a worker of concurrency 4 (they hold a token), four started: the
 * one it took ahead (prefetch), waiting for a slot.
 */
async function theTaskTakenAhead(t: TestSchema, worker: WorkerProcess, ids: string[]): Promise<{ workflow_id: string; step_id: string }> {
  const taken = await waitFor(async () => {
    const rows = await t.q<{ workflow_id: string; step_id: string }>(
      `SELECT workflow_id::text, id::text AS step_id FROM stepd.workflow_steps WHERE workflow_id = ANY ($1::bigint[]) AND task_token_hash IS NOT NULL`,
      [ids],
    );
    return rows.length === 5 ? rows : undefined;
  }, 'five tasks to be taken');
  await waitFor(() => worker.events.filter((e) => e.event === 'start').length === 4, 'four tasks to start');
  const started = new Set(worker.events.filter((e) => e.event === 'start').map((e) => String(e.stepId)));
  return taken.find((r) => !started.has(r.step_id))!;
}

describe('the worker SDK', () => {
  it('serves the worker steps of workflows that mix them with executor tools; bad arguments fail with bad_args, never reaching run', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    const workers = [await spawnWorker(t, url), await spawnWorker(t, url, { WORKER_LISTEN: 'false' })];
    expect(workers[0]!.events[0]!.listening).toBe(true);
    expect(workers[1]!.events[0]!.listening).toBe(false);
    const ids = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => insertWorkflow(t, MIXED, { amount: 100 * n }, { user: 'james' })));
    for (const [i, id] of ids.entries()) {
      const wf = await waitForWorkflow(t, id);
      expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
      expect(wf.output).toEqual({ charged: `ch_${100 * (i + 1)}`, user: 'james' });
    }
    const starts = workers.flatMap((w) => w.events.filter((e) => e.event === 'start'));
    expect(starts).toHaveLength(6);
    // A bad argument: refused by the zod schema before run, not retried.
    const bad = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: { amount: 'lots' }, done: true } } });
    const wf = await waitForWorkflow(t, bad);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'bad_args' });
    expect((await getSteps(t, bad)).map((s) => s.attempt)).toEqual([1]);
    expect(workers.flatMap((w) => w.events.filter((e) => e.event === 'start'))).toHaveLength(6);
  });

  it('a worker SIGKILLed mid-task: the step is retaken by another after its lease, with the same idempotency key, and done once', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    const doomed = await spawnWorker(t, url, { WORKER_LEASE_MS: '1500', WORKER_TOOL_MS: '600000' });
    const id = await insertWorkflow(t, MIXED, { amount: 7 });
    const first = await doomed.waitForEvent((e) => e.event === 'start', 'the first attempt to start');
    doomed.child.kill('SIGKILL');
    await doomed.exited;
    const rescuer = await spawnWorker(t, url);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    const second = rescuer.events.filter((e) => e.event === 'start');
    expect(second).toHaveLength(1);
    expect(second[0]!.attempt).toBe(2);
    expect(second[0]!.key).toBe(first.key);
    const charges = (await getSteps(t, id)).filter((s) => s.name === 'charge');
    expect(charges.map((s) => [s.attempt, s.status, (s.error as { code?: string } | null)?.code ?? null])).toEqual([
      [1, 'failed', 'lost'],
      [2, 'done', null],
    ]);
    expect(rescuer.events.filter((e) => e.event === 'end').map((e) => e.end)).toEqual(['finished']);
  });

  it('cancelling the workflow aborts ctx.signal within a second (LISTEN hint, confirmed by extend_task); nothing is reported', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    // Heartbeats every 20 s: only the cancellation hint can make it in time.
    const worker = await spawnWorker(t, url, { WORKER_HEARTBEAT_MS: '20000' });
    const id = await insertWorkflow(t, { start: 'h', steps: { h: { tool: 'billing.hang', args: {}, done: true } } });
    const started = await worker.waitForEvent((e) => e.event === 'start', 'the task to start');
    const cancelledAt = Date.now();
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    const aborted = await worker.waitForEvent((e) => e.event === 'aborted' && e.stepId === started.stepId, 'ctx.signal to abort');
    expect(aborted.reason).toBe('cancelled');
    expect(aborted.at - cancelledAt).toBeLessThan(1_000);
    const end = await worker.waitForEvent((e) => e.event === 'end', 'the task to end');
    expect(end.end).toBe('cancelled');
  });

  it('SIGTERM stops taking, lets the running task finish and report, then exits', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    const worker = await spawnWorker(t, url, { WORKER_TOOL_MS: '800' });
    const id = await insertWorkflow(t, MIXED, { amount: 3 });
    await worker.waitForEvent((e) => e.event === 'start', 'the task to start');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(worker.events.filter((e) => e.event === 'end').map((e) => e.end)).toEqual(['finished']);
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });

  it('a lease the worker cannot extend aborts ctx.signal and reports nothing; the step is retaken', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    // Heartbeats slower than the lease: the worker must give the task up when its lease ends.
    const worker = await spawnWorker(t, url, { WORKER_LEASE_MS: '1000', WORKER_HEARTBEAT_MS: '60000', WORKER_HANG_MS: '3000', WORKER_CONCURRENCY: '1' });
    const id = await insertWorkflow(t, { start: 'h', steps: { h: { tool: 'billing.hang', args: {}, retry: { maxAttempts: 2, initial: '10ms' }, done: true } } });
    const aborted = await worker.waitForEvent((e) => e.event === 'aborted', 'ctx.signal to abort on the lost lease');
    expect(aborted.reason).toBe('lease_lost');
    await waitFor(() => worker.events.filter((e) => e.event === 'end').length >= 1, 'the first attempt to end');
    expect(worker.events.find((e) => e.event === 'end')!.end).toBe('lease_lost');
    const wf = await waitForWorkflow(t, id);
    // The second attempt is lost the same way: the workflow fails with lost, never with a result of the first.
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'lost' });
  });

  it('tasks taken ahead of a free slot (prefetch) are held: never more run than the concurrency, and one cancelled while it waits never runs', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    // Concurrency 4 takes one task ahead (prefetch: a quarter of it).
    const worker = await spawnWorker(t, url, { WORKER_CONCURRENCY: '4', WORKER_HANG_MS: '4000' });
    const hang = { start: 'h', steps: { h: { tool: 'billing.hang', args: {}, done: true } } };
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => insertWorkflow(t, hang)));
    const waiting = await theTaskTakenAhead(t, worker, ids);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [waiting.workflow_id]);
    await waitFor(() => worker.events.filter((e) => e.event === 'end').length === 5, 'every task to end', 20_000);
    const ends = new Map(worker.events.filter((e) => e.event === 'end').map((e) => [String(e.stepId), e.end]));
    expect(ends.get(waiting.step_id)).toBe('cancelled');
    expect(worker.events.filter((e) => e.event === 'start').map((e) => String(e.stepId))).not.toContain(waiting.step_id);
    for (const id of ids.filter((x) => String(x) !== waiting.workflow_id)) expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });

  it('a stop hands back a task taken ahead that never started: a lost attempt, retried at once by another worker without spending retry.maxAttempts', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { tools: billing() });
    const url = await workerRoleUrl(t);
    // Concurrency 4 takes one task ahead; the four it starts hang past the stop's grace.
    const first = await spawnWorker(t, url, { WORKER_CONCURRENCY: '4', WORKER_GRACE_MS: '3000' });
    // One attempt each: a task the stop aborts fails its workflow; one handed back must not.
    const hang = { start: 'h', steps: { h: { tool: 'billing.hang', args: {}, retry: { maxAttempts: 1 }, done: true } } };
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => insertWorkflow(t, hang)));
    const waiting = await theTaskTakenAhead(t, first, ids);

    first.child.kill('SIGTERM');
    const handedBack = await first.waitForEvent((e) => e.event === 'end' && String(e.stepId) === waiting.step_id, 'the waiting task to be handed back');
    expect(handedBack.end).toBe('handed_back');
    const second = await spawnWorker(t, url, { WORKER_CONCURRENCY: '1', WORKER_HANG_MS: '10' });
    expect((await waitForWorkflow(t, waiting.workflow_id)).status).toBe('completed');
    const rows = await getSteps(t, waiting.workflow_id);
    expect(rows.map((r) => [r.attempt, r.status, (r.error as { code?: string } | null)?.code ?? null])).toEqual([
      [1, 'failed', 'lost'],
      [2, 'done', null],
    ]);
    expect(second.events.filter((e) => e.event === 'start').map((e) => [String(e.stepId), e.attempt])).toEqual([[rows[1]!.id, 2]]);

    // The four it started are aborted after the grace (the hand-back came when the stop began): each spends its one attempt.
    expect(await first.exited).toBe(0);
    const order = first.events.filter((e) => e.event === 'aborted' || e === handedBack).map((e) => e.event);
    expect(order).toEqual(['end', 'aborted', 'aborted', 'aborted', 'aborted']);
    const ends = first.events.filter((e) => e.event === 'end' && String(e.stepId) !== waiting.step_id).map((e) => e.end);
    expect(ends).toEqual(['failed', 'failed', 'failed', 'failed']);
    expect(first.events.filter((e) => e.event === 'start').map((e) => String(e.stepId))).not.toContain(waiting.step_id);
    for (const id of ids.filter((x) => String(x) !== waiting.workflow_id)) {
      const wf = await waitForWorkflow(t, id);
      expect(wf.status).toBe('failed');
      expect(wf.error).toMatchObject({ code: 'worker_stopped' });
    }
  });
});
