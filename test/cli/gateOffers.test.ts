/**
 * `stepd status` offers approve/reject only to a user the gate's approvers admit, shows the
 * gate's approval.schema to the approver, and says which child a sub-workflow's gate belongs to.
 * Built CLI, real database, in-process executor.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitForStep } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

const FLOW = {
  start: 'ask',
  steps: {
    ask: { approval: { message: 'Buy?', approvers: ['alice', 'bob'], schema: { type: 'object', required: ['budget'], properties: { budget: { type: 'integer' } } } }, next: 'done' },
    done: { tool: 'core.echo', args: {} },
  },
};

describe('stepd status offers what the user may do with a gate', () => {
  it('an approver sees the commands and the schema; anyone else is told they may not approve it; --json says mayApprove', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, FLOW);
    const gate = await waitForStep(t, id, 'ask', 'pending');

    const alice = await runCli(['status', id, '--user', 'alice'], { env: envFor(t) });
    expect(alice.stdout).toContain(`waiting: step ${gate.id} (ask) — approve: stepd approve ${gate.id}`);
    expect(alice.stdout).toContain(`approval.schema (approve with --data '{…}' matching it): {"type":"object","required":["budget"],"properties":{"budget":{"type":"integer"}}}`);

    const mallory = await runCli(['status', id, '--user', 'mallory'], { env: envFor(t) });
    expect(mallory.stdout).toContain(`waiting: step ${gate.id} (ask) — for one of its approvers; you may not approve or reject it`);
    expect(mallory.stdout).toContain('approvers: alice, bob');
    expect(mallory.stdout).not.toContain('stepd approve');
    expect(mallory.stdout).toMatch(/ask \(gate\)  #\d+  waiting for approval \([^)]*\) \(not yours to approve\)/);
    expect(mallory.stdout).not.toContain('approval.schema');

    // stepd approve refuses data the schema refuses before writing, and shows the schema.
    const refused = await runCli(['approve', gate.id, '--by', 'alice'], { env: envFor(t) });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('result.budget: is required');
    expect(refused.stderr).toContain('approval.schema: {"type":"object","required":["budget"]');
    const notYours = await runCli(['approve', gate.id, '--data', '{"budget": 1}', '--by', 'mallory'], { env: envFor(t) });
    expect(notYours.code).toBe(1);
    expect(notYours.stderr).toContain('user "mallory" may not approve step');

    const json = JSON.parse((await runCli(['status', id, '--json'], { env: { ...envFor(t), STEPD_USER: 'mallory' } })).stdout);
    expect(json.waiting[0]).toMatchObject({ stepId: gate.id, mayApprove: false, approvers: ['alice', 'bob'], schema: FLOW.steps.ask.approval.schema });
  });
});
