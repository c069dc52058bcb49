import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const ready = (t: TestSchema, stepId: string, result?: unknown) =>
  result === undefined
    ? t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [stepId])
    : t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = $2 WHERE id = $1 AND status = 'pending'`, [stepId, JSON.stringify(result)]);

const approvalFlow = (approval: unknown, extra: Record<string, unknown> = {}) => ({
  start: 'approve',
  steps: {
    approve: { approval, next: 'act', ...extra },
    act: { tool: 'core.echo', args: { decision: '{{steps.approve.result}}' } },
    ...(extra.onError ? { handle: { tool: 'core.echo', args: { why: '{{error.message}}', code: '{{error.code}}' } } } : {}),
  },
});

describe('approval gates', () => {
  it('takes the result written by whoever readied the gate as the step result, visible to the next step', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, approvalFlow({ timeout: '24h' }));
    const gate = await waitForStep(t, id, 'approve', 'pending');
    expect(gate.tool).toBeNull();
    expect(gate.expires_at).not.toBeNull();
    expect((await getSteps(t, id)).map((s) => s.name)).toEqual(['approve']);
    await ready(t, gate.id, { approved: true, by: 'alice', budget: 10 });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ decision: { approved: true, by: 'alice', budget: 10 } });
    expect((await getSteps(t, id))[0]).toMatchObject({ status: 'done', result: { approved: true, by: 'alice', budget: 10 } });
  });

  it('fails the workflow with code rejected when readied with approved: false', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, approvalFlow(true));
    const gate = await waitForStep(t, id, 'approve', 'pending');
    await ready(t, gate.id, { approved: false, reason: 'too costly' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'rejected', step: 'approve' });
    expect(wf.error!.message).toContain('too costly');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.attempt])).toEqual([['approve', 'failed', 1]]);
  });

  it('routes a rejection to onError, with the reason in {{error.message}}', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, approvalFlow(true, { onError: 'handle' }));
    const gate = await waitForStep(t, id, 'approve', 'pending');
    await ready(t, gate.id, { approved: false, reason: 'too costly' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toMatchObject({ code: 'rejected' });
    expect((wf.output as { why: string }).why).toContain('too costly');
  });
});

describe('gate timeouts', () => {
  it('onTimeout fail (the default): the workflow fails with gate_timeout', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, approvalFlow({ timeout: '100ms' }));
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'gate_timeout', step: 'approve' });
    expect((await getSteps(t, id)).map((s) => [s.name, s.status])).toEqual([['approve', 'failed']]);
  });

  it('onTimeout approve: the gate completes and the flow goes on', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, approvalFlow({ timeout: '100ms', onTimeout: 'approve' }));
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ decision: { approved: true, timedOut: true } });
  });

  it('onTimeout reject: the gate fails with rejected (and onError, if any, takes over)', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const failing = await insertWorkflow(t, approvalFlow({ timeout: '100ms', onTimeout: 'reject' }));
    const routed = await insertWorkflow(t, approvalFlow({ timeout: '100ms', onTimeout: 'reject' }, { onError: 'handle' }));
    const wf = await waitForWorkflow(t, failing);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'rejected', step: 'approve' });
    const wf2 = await waitForWorkflow(t, routed);
    expect(wf2.status).toBe('completed');
    expect(wf2.output).toMatchObject({ code: 'rejected' });
  });

  it('a gate readied before its timeout is not timed out afterwards', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, approvalFlow({ timeout: '300ms' }));
    const gate = await waitForStep(t, id, 'approve', 'pending');
    await ready(t, gate.id);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ decision: { approved: true } });
  });
});

describe('timers', () => {
  it('wait: "50ms" creates the step ready with ready_at in the future; it completes after that', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'pause',
      steps: { pause: { wait: '50ms', next: 'after' }, after: { tool: 'core.echo', args: { ok: true } } },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ ok: true });
    const [pause] = await t.q(
      `SELECT status, tool, extract(epoch FROM ready_at - created_at) * 1000 AS delay_ms, completed_at >= ready_at AS after_due,
              started_at >= ready_at AS claimed_when_due
         FROM stepd.workflow_steps WHERE workflow_id = $1 AND name = 'pause'`,
      [id],
    );
    expect(pause).toMatchObject({ status: 'done', tool: null, after_due: true, claimed_when_due: true });
    expect(Number(pause.delay_ms)).toBeGreaterThanOrEqual(50);
  });

  it('wait: {until: "{{input.at}}"} makes the step claimable at that instant', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    // Far enough ahead that a loaded machine admits the workflow before the instant passes.
    const [{ at }] = await t.q(`SELECT to_json(now() + interval '1500 milliseconds') #>> '{}' AS at`);
    const id = await insertWorkflow(t, {
      start: 'pause',
      steps: { pause: { wait: { until: '{{input.at}}' }, next: 'after' }, after: { tool: 'core.echo', args: { at: '{{input.at}}' } } },
    }, { at });
    const row = await waitForStep(t, id, 'pause', 'ready');
    // Exact to the millisecond (the executor reads the instant as a JS Date).
    const [cmp] = await t.q(`SELECT ready_at = date_trunc('milliseconds', $2::timestamptz) AS exact, ready_at > created_at AS future FROM stepd.workflow_steps WHERE id = $1`, [row.id, at]);
    expect(cmp).toEqual({ exact: true, future: true });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const [done] = await t.q(`SELECT started_at >= ready_at AS claimed_when_due FROM stepd.workflow_steps WHERE id = $1`, [row.id]);
    expect(done.claimed_when_due).toBe(true);
  });

  it('a wait.until that is not a date fails the step with template_error', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'pause',
      steps: { pause: { wait: { until: '{{input.at}}' } } },
    }, { at: 'not a date' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'template_error', step: 'pause' });
  });
});
