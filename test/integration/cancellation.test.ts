import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';

describe('cancellation', () => {
  it('cancelling a workflow while a step runs cancels the step row and aborts the tool', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'sleep',
      steps: { sleep: { tool: 'core.sleep', args: { ms: 60_000 }, next: 'after' }, after: { tool: 'core.noop' } },
    });
    await waitForStep(t, id, 'sleep', 'running');
    await waitFor(() => executor.runningCount === 1, 'the sleep to run in the executor');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('cancelled');
    expect(wf.cancelled_at).not.toBeNull();
    await waitFor(() => executor.runningCount === 0, 'the aborted tool to leave the executor');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status])).toEqual([['sleep', 'cancelled']]);
    expect(steps[0]!.result).toBeNull();
  });

  it('cancelling a workflow waiting at a gate cancels the gate; readying it afterwards is refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'gate', steps: { gate: { approval: true, next: 'after' }, after: { tool: 'core.noop' } } });
    const gate = await waitForStep(t, id, 'gate', 'pending');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    expect((await waitForWorkflow(t, id)).status).toBe('cancelled');
    expect((await getSteps(t, id))[0]!.status).toBe('cancelled');
    await expect(t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id])).rejects.toThrow(/only a pending step can be readied/);
  });

  it('cancelling one workflow leaves another one running on the same executor untouched', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const flow = { start: 'sleep', steps: { sleep: { tool: 'core.sleep', args: { ms: '{{input.ms}}' } } } };
    const doomed = await insertWorkflow(t, flow, { ms: 60_000 });
    const survivor = await insertWorkflow(t, flow, { ms: 300 });
    await waitForStep(t, doomed, 'sleep', 'running');
    await waitForStep(t, survivor, 'sleep', 'running');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [doomed]);
    const wf = await waitForWorkflow(t, survivor);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ slept: 300 });
    expect((await waitForWorkflow(t, doomed)).status).toBe('cancelled');
    await waitFor(() => executor.runningCount === 0, 'no step left running');
  });
});

describe('cancelling whatever is running', () => {
  it('cancels a workflow whose steps were claimed after the cancelling transaction began', async () => {
    const t = await createTestSchema();
    const id = await insertWorkflow(t, { start: 'sleep', steps: { sleep: { tool: 'core.sleep', args: { ms: 60_000 } } } });
    const canceller = await t.db.connect();
    try {
      // The cancelling transaction's now() is fixed before the executor claims the step.
      await canceller.query('BEGIN');
      const { rows } = await canceller.query<{ began: Date }>('SELECT now() AS began');
      await startExecutor(t);
      const running = await waitForStep(t, id, 'sleep', 'running');
      expect(running.started_at!.getTime()).toBeGreaterThan(rows[0]!.began.getTime());
      await canceller.query(`UPDATE ${t.schema}.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
      await canceller.query('COMMIT');
    } finally {
      canceller.release();
    }
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('cancelled');
    const [step] = await getSteps(t, id);
    expect(step!.status).toBe('cancelled');
    expect(step!.completed_at!.getTime()).toBeGreaterThanOrEqual(step!.started_at!.getTime());
  });
});

describe('the workflow deadline', () => {
  it('fails a workflow that runs past its flow timeout with deadline, cancelling and aborting its step', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'sleep',
      timeout: '200ms',
      steps: { sleep: { tool: 'core.sleep', args: { ms: 60_000 } } },
    });
    await waitForStep(t, id, 'sleep', 'running');
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'deadline' });
    expect((await getSteps(t, id)).map((s) => [s.name, s.status])).toEqual([['sleep', 'cancelled']]);
    await waitFor(() => executor.runningCount === 0, 'the aborted sleep to leave the executor');
    const [timing] = await t.q(`SELECT completed_at - started_at >= interval '200 milliseconds' AS past_deadline FROM stepd.workflows WHERE id = $1`, [id]);
    expect(timing.past_deadline).toBe(true);
  });

  it('a deadline also ends a workflow waiting at a gate', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'gate', timeout: '150ms', steps: { gate: { approval: true } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'deadline' });
    expect((await getSteps(t, id))[0]!.status).toBe('cancelled');
  });
});
