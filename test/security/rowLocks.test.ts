/**
 * Row locks held by a client. A client role may UPDATE workflows (to cancel or redrive) and steps
 * (to ready a gate), so it may also take their row locks with SELECT … FOR UPDATE and keep them
 * as long as it likes. The executor must not let one held row stop the others: claims skip held
 * step rows, shared outcome batches skip held workflow rows, the lane that records them one
 * workflow at a time waits for a row at most a short while and then serves the others first, and
 * the watchdog leaves a held row for its next sweep.
 */
import { describe, expect, it } from 'vitest';
import { holdTools } from '../helpers/holdTools.js';
import { holdRow, insertWorkflow, securityEnv, waitFor, waitForWorkflow, type TestSchema } from './helpers.js';


const HELD = (v: string) => ({ start: 'x', steps: { x: { tool: 'hold.wait', args: { v }, done: true, output: '{{result}}' } } });

/** Fails once, retryably; its second attempt is a ready row the claim loop takes when it is due. */
const RETRIED_LATER = { start: 'x', steps: { x: { tool: 'core.fail', args: { retryable: true, message: 'again' }, retry: { maxAttempts: 2, initial: '1s', jitter: false } } } };

async function secondAttempt(t: TestSchema, workflowId: string): Promise<{ id: string; status: string } | undefined> {
  return (await t.q<{ id: string; status: string }>(`SELECT id, status FROM stepd.workflow_steps WHERE workflow_id = $1 AND attempt = 2`, [workflowId]))[0];
}

describe('a client holding ready step rows', () => {
  it("cannot stop the claims: the held row is skipped, other workflows' steps are claimed, and it is claimed once let go", async () => {
    const env = await securityEnv();
    const { t } = env;
    const a = await insertWorkflow(t, RETRIED_LATER);
    const attemptA = await waitFor(async () => {
      const row = await secondAttempt(t, a);
      return row?.status === 'ready' ? row : undefined;
    }, "a's second attempt, ready later");
    const held = await holdRow(env.client.pool, t, attemptA.id, { table: 'workflow_steps' });

    const b = await insertWorkflow(t, RETRIED_LATER);
    const failedB = await waitForWorkflow(t, b);
    expect(failedB.status).toBe('failed');
    expect((await secondAttempt(t, b))?.status).toBe('failed');
    // Due since before b's: still ready, skipped by every claim while the client holds it.
    expect((await secondAttempt(t, a))?.status).toBe('ready');
    expect((await t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [a]))[0].status).toBe('running');

    await held.release();
    const failedA = await waitForWorkflow(t, a);
    expect(failedA.status).toBe('failed');
    expect((await secondAttempt(t, a))?.status).toBe('failed');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('a client holding workflow rows', () => {
  it("cannot stop the outcomes of other workflows: the held one waits its turn while the others' are recorded", async () => {
    const hold = holdTools();
    const env = await securityEnv({ providers: [hold] });
    const { t } = env;
    const a = await insertWorkflow(t, HELD('a'));
    const b = await insertWorkflow(t, HELD('b'));
    await waitFor(() => hold.waiting.has(a) && hold.waiting.has(b), 'both tool calls in flight');

    const heldA = await holdRow(env.client.pool, t, a);
    const heldB = await holdRow(env.client.pool, t, b);
    // Both outcomes in one batch: both rows are held, so both go to the lane that records one workflow at a time.
    hold.release(a, b);
    await waitFor(
      async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [heldA.pid])).length > 0,
      "the executor's transaction to wait for workflow a's row",
    );
    await heldB.release();

    // Workflow a's row is still held: b is recorded anyway.
    const doneB = await waitForWorkflow(t, b);
    expect(doneB.status).toBe('completed');
    expect(doneB.output).toEqual({ v: 'b' });
    expect((await t.q(`SELECT status FROM stepd.workflow_steps WHERE workflow_id = $1`, [a]))[0].status).toBe('running');
    await env.bystander.assertUndisturbedAndServed();

    await heldA.release();
    const doneA = await waitForWorkflow(t, a);
    expect(doneA.status).toBe('completed');
    expect(doneA.output).toEqual({ v: 'a' });
  });

  it('cannot stop the watchdog: a gate whose workflow row is held times out at a later sweep, and another gate times out meanwhile', async () => {
    const env = await securityEnv();
    const { t } = env;
    const gate = { start: 'g', steps: { g: { approval: { timeout: '200ms' }, next: 'end' }, end: { tool: 'core.noop', done: true } } };
    const a = await insertWorkflow(t, gate);
    // Held once admitted (a row held while still new is skipped by admission instead: another test).
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE id = $1 AND status = 'running'`, [a])).length > 0, 'workflow a admitted');
    const held = await holdRow(env.client.pool, t, a);
    const b = await insertWorkflow(t, gate);
    // a's gate expires first (inserted first); its row is held, so only b's can be handled.
    const failedB = await waitForWorkflow(t, b);
    expect(failedB.status).toBe('failed');
    expect((failedB.error as { code?: string } | null)?.code).toBe('gate_timeout');
    expect((await t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [a]))[0].status).toBe('running');

    await held.release();
    const failedA = await waitForWorkflow(t, a);
    expect((failedA.error as { code?: string } | null)?.code).toBe('gate_timeout');
    await env.bystander.assertUndisturbedAndServed();
  });
});
