/**
 * A gate whose readying was claimed by an executor that then died is retried as a gate: the new
 * attempt waits for someone again. Retried as a ready row it would read as {"approved": true}
 * and a rejection (or no decision at all) would turn into an approval.
 */
import { describe, expect, it } from 'vitest';
import { asExecutor, createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';

const flow = {
  start: 'approve',
  steps: {
    approve: { approval: { timeout: '1h', message: 'ship {{input.what}}?' }, next: 'act' },
    act: { tool: 'core.echo', args: { decision: '{{steps.approve.result}}' } },
  },
};

describe('a gate lost while its readying was being taken', () => {
  it('waits again as a new pending attempt with its message, instead of completing as approved', async () => {
    const t = await createTestSchema();
    const first = await startExecutor(t);
    const id = await insertWorkflow(t, flow, { what: 'v2' });
    const gate = await waitForStep(t, id, 'approve', 'pending');
    await first.stop({ graceMs: 0 });

    // A rejection, claimed by an executor that dies before recording it (its lease has run out).
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false, "reason": "no"}' WHERE id = $1`, [gate.id]);
    await asExecutor(
      t,
      `UPDATE stepd.workflow_steps SET status = 'running', started_at = now(), lease_until = now() - interval '1 second',
              executor_id = 'gone-executor' WHERE id = $1`,
      [gate.id],
    );

    await startExecutor(t);
    const retried = await waitFor(async () => {
      const rows = (await getSteps(t, id)).filter((s) => s.name === 'approve' && s.attempt === 2);
      return rows[0];
    }, 'the gate retried');
    expect(retried.status).toBe('pending');
    expect(retried.result).toBeNull();
    expect(retried.expires_at).not.toBeNull();
    expect(retried.args).toMatchObject({ message: 'ship v2?' });
    const lost = (await getSteps(t, id)).find((s) => s.id === gate.id)!;
    expect(lost.status).toBe('failed');
    expect(lost.error?.code).toBe('lost');
    expect((await t.q(`SELECT status FROM stepd.workflows WHERE id = $1`, [id]))[0].status).toBe('running');

    // The decision is asked again, and this time it counts.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false, "reason": "still no"}' WHERE id = $1 AND status = 'pending'`, [retried.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error?.code).toBe('rejected');
  });
});
