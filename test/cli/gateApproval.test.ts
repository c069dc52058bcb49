/**
 * Gates from the CLI: approval.message in `stepd status`, approval.schema refused up front by
 * `stepd approve` with paths, and a refusal made by the executor shown by status.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

const flow = {
  start: 'ask',
  steps: {
    ask: {
      approval: { message: 'Buy {{input.what}}?', approvers: ['alice', 'bob'], schema: { type: 'object', required: ['budget'], properties: { budget: { type: 'integer', maximum: 500 } } } },
      next: 'act',
    },
    act: { tool: 'core.echo', args: { budget: '{{step.ask.budget}}' }, done: true, output: '{{result.budget}}' },
  },
};

describe('stepd approve and status with approval.message / schema / approvers', () => {
  it('status shows the rendered message and approvers; approve refuses data the schema refuses, with paths, and the gate stays waiting', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    const id = await insertWorkflow(t, flow, { what: 'GPUs' });
    const gate = await waitForStep(t, id, 'ask', 'pending');

    const status = await runCli(['status', id], { env });
    expect(status.stdout).toContain('message: Buy GPUs?');
    expect(status.stdout).toContain('approvers: alice, bob');
    const json = JSON.parse((await runCli(['status', id, '--json'], { env })).stdout);
    expect(json.waiting[0]).toMatchObject({ stepId: gate.id, message: 'Buy GPUs?', approvers: ['alice', 'bob'] });

    const refused = await runCli(['approve', gate.id, '--data', '{"budget": 900, "note": 1}', '--by', 'alice'], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('result.budget: must be <= 500');
    const [row] = await t.q(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [gate.id]);
    expect(row.status).toBe('pending');

    // A readying written straight in SQL is refused by the executor: status shows why.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"budget": "lots"}', readied_by = 'bob' WHERE id = $1`, [gate.id]);
    await waitFor(async () => (await t.q(`SELECT status, error FROM stepd.workflow_steps WHERE id = $1`, [gate.id]))[0].error, 'the refusal');
    const after = await runCli(['status', id], { env });
    expect(after.stdout).toContain('refused: [approval_refused]');
    expect(after.stdout).toContain('result.budget: must be integer');

    const ok = await runCli(['approve', gate.id, '--data', '{"budget": 300}', '--by', 'bob'], { env });
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: 300 });
  });
});
