import { describe, expect, it } from 'vitest';
import { Operations } from '../../src/api/operations.js';
import { OperationError } from '../../src/api/errors.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { resolveCaps } from '../../src/flow/caps.js';
import { createPermissionPolicy } from '../../src/tools/permissions.js';
import { createTestSchema, getSteps, getWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const gated = (approval: Record<string, unknown> | true = true) => ({
  start: 'review',
  steps: {
    review: { description: 'Ship it?', approval, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: true } },
  },
});

const approversFlow = gated({ approvers: ['alice'] });

function operations(t: TestSchema, permissions?: Parameters<typeof createPermissionPolicy>[0]): Operations {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  return new Operations({ pool, db, schema: t.schema, ...(permissions ? { permissions: createPermissionPolicy(permissions) } : {}) });
}

async function refusal(p: Promise<unknown>): Promise<OperationError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(OperationError);
    return err as OperationError;
  }
  throw new Error('expected an OperationError');
}

describe('workflow operations as a user', () => {
  it('starts a gated workflow as the user, shows the waiting gate, and records the approver in readied_by', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const ops = operations(t);
    const started = await ops.startWorkflow('alice', { name: 'release', flow: gated(), input: { v: 1 } });
    expect(started).toMatchObject({ name: 'release', status: 'new', created: true });
    const gate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId: started.workflowId })).waiting[0], 'the gate to wait');
    expect(gate).toMatchObject({ name: 'review', message: 'Ship it?' });

    const approved = await ops.approveStep('alice', { stepId: gate.stepId });
    expect(approved).toMatchObject({ stepId: gate.stepId, workflowId: started.workflowId, status: 'ready', readiedBy: 'alice' });
    const wf = await waitForWorkflow(t, started.workflowId);
    expect(wf).toMatchObject({ status: 'completed', created_by: 'alice' });
    expect((await getSteps(t, started.workflowId)).find((s) => s.name === 'review')?.readied_by).toBe('alice');

    const again = await refusal(ops.approveStep('bob', { stepId: gate.stepId }));
    expect(again.code).toBe('refused');
    expect(again.message).toMatch(/^step \d+ \(review, workflow \d+\) is done; only a pending step can be approved$/);
  });

  it('shows a gate\'s approval.message as rendered, refuses data its approval.schema refuses, and shows an approval the daemon refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const ops = operations(t);
    const flow = gated({ message: 'Ship {{input.version}}?', schema: { type: 'object', required: ['approved', 'ticket'] } });
    const { workflowId } = await ops.startWorkflow('alice', { name: 'release', flow, input: { version: '1.2' } });
    const gate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId })).waiting[0], 'the gate to wait');
    expect(gate.message).toBe('Ship 1.2?');
    const err = await refusal(ops.approveStep('alice', { stepId: gate.stepId, data: { approved: true } }));
    expect(err.code).toBe('invalid_input');
    expect(err.message).toContain('approval.schema');
    // Readied around the operations (plain SQL) with data the schema refuses: the daemon refuses it and the gate waits again.
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true}', readied_by = 'alice' WHERE id = $1 AND status = 'pending'`, [gate.stepId]);
    const again = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId })).waiting.find((w) => w.refused !== undefined), 'the refused approval');
    expect(again.stepId).toBe(gate.stepId);
    await ops.approveStep('alice', { stepId: gate.stepId, data: { approved: true, ticket: 'T-1' } });
    expect((await waitForWorkflow(t, workflowId)).status).toBe('completed');
  });

  it('rejects a gate with a reason: the workflow fails with code rejected', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const ops = operations(t);
    const { workflowId } = await ops.startWorkflow('alice', { name: 'release', flow: JSON.stringify(gated()) });
    const gate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId })).waiting[0], 'the gate to wait');
    const rejected = await ops.rejectStep('carol', { stepId: gate.stepId, reason: 'not today' });
    expect(rejected).toMatchObject({ readiedBy: 'carol', result: { approved: false, reason: 'not today' } });
    const wf = await waitForWorkflow(t, workflowId);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'rejected' });
  });

  it('retries a failed workflow: a rejected gate waits again and can then be approved', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const ops = operations(t);
    const { workflowId } = await ops.startWorkflow('alice', { name: 'release', flow: gated() });
    const firstGate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId })).waiting[0], 'the gate to wait');
    const notFailed = await refusal(ops.retryWorkflow('alice', { workflowId }));
    expect(notFailed).toMatchObject({ code: 'refused', message: `workflow ${workflowId} (release) is running; only a failed workflow can be redriven` });
    await ops.rejectStep('alice', { stepId: firstGate.stepId, reason: 'not yet' });
    expect((await waitForWorkflow(t, workflowId)).status).toBe('failed');

    // Only the workflow's own user (or an admin, config api.admins) may retry it.
    const notBob = await refusal(ops.retryWorkflow('bob', { workflowId }));
    expect(notBob).toMatchObject({ code: 'permission_denied', message: `user "bob" may not retry workflow ${workflowId} (release): it was started by user "alice"; only its own user or an admin (config api.admins) may cancel or retry it` });
    const retried = await ops.retryWorkflow('alice', { workflowId });
    expect(retried).toMatchObject({ workflowId, status: 'running', name: 'release' });
    const secondGate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId })).waiting.find((w) => w.stepId !== firstGate.stepId), 'the gate to wait again');
    await ops.approveStep('alice', { stepId: secondGate.stepId });
    expect((await waitForWorkflow(t, workflowId)).status).toBe('completed');
    expect((await refusal(ops.retryWorkflow('alice', { workflowId: '999999' }))).code).toBe('not_found');
  });

  it('refuses to start a flow calling a tool the user may not call, and starts nothing', async () => {
    const t = await createTestSchema();
    const ops = operations(t, { default: ['core.*'], users: { alice: ['http.*'] } });
    const flow = { start: 'get', steps: { get: { tool: 'http.request', args: { url: 'https://example.com' } } } };
    const err = await refusal(ops.startWorkflow('bob', { name: 'fetch', flow }));
    expect(err.code).toBe('permission_denied');
    expect(err.message).toBe('user "bob" may not call tool "http.request"; nothing was started');
    expect(await t.q('SELECT id FROM stepd.workflows')).toEqual([]);
    expect((await ops.startWorkflow('alice', { name: 'fetch', flow })).created).toBe(true);
  });

  it('lets only the gate\'s approvers approve or reject it', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const ops = operations(t);
    const { workflowId } = await ops.startWorkflow('bob', { name: 'release', flow: approversFlow });
    const gate = await waitFor(async () => (await ops.getWorkflow('bob', { workflowId })).waiting[0], 'the gate to wait');
    expect(gate.approvers).toEqual(['alice']);
    for (const attempt of [ops.approveStep('bob', { stepId: gate.stepId }), ops.rejectStep('bob', { stepId: gate.stepId })]) {
      const err = await refusal(attempt);
      expect(err.code).toBe('permission_denied');
      expect(err.message).toMatch(/^user "bob" may not (approve|reject) step \d+ \(review, workflow \d+\): its approvers are alice$/);
    }
    await ops.approveStep('alice', { stepId: gate.stepId });
    expect((await waitForWorkflow(t, workflowId)).status).toBe('completed');
  });

  it('starts a registered flow by name, pinned to the version it checked, and lists the registry', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const ops = operations(t, { default: ['core.*'] });
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('release', $1)`, [JSON.stringify(gated())]);
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('fetch', $1)`, [JSON.stringify({ start: 'get', steps: { get: { tool: 'http.request', args: { url: 'https://example.com' } } } })]);
    expect((await ops.listFlows('alice')).flows.map((f) => [f.name, f.version, f.versions])).toEqual([['fetch', 1, 1], ['release', 1, 1]]);

    const started = await ops.startWorkflow('alice', { name: 'release' });
    expect(started).toMatchObject({ name: 'release', created: true });
    const gate = await waitFor(async () => (await ops.getWorkflow('alice', { workflowId: started.workflowId })).waiting[0], 'the gate to wait');
    await ops.approveStep('alice', { stepId: gate.stepId });
    expect(await waitForWorkflow(t, started.workflowId)).toMatchObject({ status: 'completed', flow_version: 1, created_by: 'alice' });

    const forbidden = await refusal(ops.startWorkflow('alice', { name: 'fetch' }));
    expect(forbidden).toMatchObject({ code: 'permission_denied', message: 'user "alice" may not call tool "http.request"; nothing was started' });
    const missing = await refusal(ops.startWorkflow('alice', { name: 'nope' }));
    expect(missing.code).toBe('not_found');
    expect(missing.message).toMatch(/^no flow named "nope" is registered .*; nothing was started$/);
    expect((await refusal(ops.startWorkflow('alice', { name: 'release', version: 2 }))).message).toMatch(/^flow "release" has no version 2 \(its latest version is 1/);
  });

  it('refuses a flow whose sub-workflow calls a tool the user may not call', async () => {
    const t = await createTestSchema();
    const ops = operations(t, { default: ['core.*'], users: { alice: ['http.*'] } });
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('fetcher', $1)`, [JSON.stringify({ start: 'get', steps: { get: { tool: 'http.request', args: { url: 'https://example.com' } } } })]);
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('outer', $1)`, [JSON.stringify({ start: 'sub', steps: { sub: { workflow: { name: 'fetcher' }, done: true } } })]);
    const parent = { start: 'sub', steps: { sub: { workflow: { name: 'outer' }, done: true } } };
    const err = await refusal(ops.startWorkflow('bob', { name: 'nested', flow: parent }));
    expect(err).toMatchObject({ code: 'permission_denied', message: 'user "bob" may not call tool "http.request" (called by the sub-workflow flow fetcher@1); nothing was started' });
    expect(await t.q('SELECT id FROM stepd.workflows')).toEqual([]);
    expect((await ops.startWorkflow('alice', { name: 'nested', flow: parent })).created).toBe(true);
  });

  it('uses the idempotency key: a second start returns the first workflow', async () => {
    const t = await createTestSchema();
    const ops = operations(t);
    const first = await ops.startWorkflow('alice', { name: 'once', flow: gated(), key: 'k-1' });
    const second = await ops.startWorkflow('alice', { name: 'once', flow: gated(), key: 'k-1' });
    expect(second).toEqual({ ...first, created: false });
  });

  it('says why, in the CLI\'s words, when a workflow or step does not exist, an id is malformed, or a flow is invalid', async () => {
    const t = await createTestSchema();
    const ops = operations(t);
    expect((await refusal(ops.getWorkflow('a', { workflowId: '999' }))).message).toBe(`workflow 999 does not exist in schema "${t.schema}" (list them with: stepd list)`);
    expect((await refusal(ops.approveStep('a', { stepId: '999' }))).code).toBe('not_found');
    expect((await refusal(ops.cancelWorkflow('a', { workflowId: 'x1' }))).message).toBe('workflow id must be a positive whole number (got "x1")');
    const invalid = await refusal(ops.startWorkflow('a', { name: 'bad', flow: { start: 'nope', steps: {} } }));
    expect(invalid.code).toBe('invalid_flow');
    expect(invalid.message).toMatch(/^the flow is not a valid flow \(\d+ issue\(s\)\); nothing was started:\n/);
    expect((invalid.details as { issues: unknown[] }).issues.length).toBeGreaterThan(0);
    expect(await ops.validateFlow('a', { flow: { start: 'nope', steps: {} } })).toMatchObject({ valid: false });
    expect(await ops.validateFlow('a', { flow: gated() })).toEqual({ valid: true, steps: 2, issues: [] });
  });

  it('refuses an input its flow\'s inputSchema refuses, listing the issues with their paths', async () => {
    const t = await createTestSchema();
    const ops = operations(t);
    const flow = { ...gated(), inputSchema: { type: 'object', required: ['version'], properties: { version: { type: 'string' } } } };
    const err = await refusal(ops.startWorkflow('alice', { name: 'typed', flow, input: { version: 3 } }));
    expect(err.code).toBe('invalid_input');
    expect(err.message).toMatch(/^the input does not match the inputSchema of the flow \(1 issue\(s\)\); nothing was started:\n {2}input\.version: /);
    expect((await ops.startWorkflow('alice', { name: 'typed', flow, input: { version: '3' } })).created).toBe(true);
  });

  it('refuses an input over the operator\'s caps before storing anything', async () => {
    const t = await createTestSchema();
    const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 1 });
    const db = createKysely(pool);
    onCleanup(() => db.destroy());
    const ops = new Operations({ pool, db, schema: t.schema, caps: resolveCaps({ inputBytes: 100 }) });
    const err = await refusal(ops.startWorkflow('alice', { name: 'big', flow: gated(), input: { text: 'x'.repeat(200) } }));
    expect(err.code).toBe('invalid_input');
    expect(err.message).toBe('the input is larger than caps.inputBytes (100 bytes); nothing was started');
    expect(await t.q('SELECT id FROM stepd.workflows')).toEqual([]);
  });

  it('an input over the caps the database holds (written by the executor) is refused as invalid_input, not an internal error', async () => {
    const t = await createTestSchema();
    await startExecutor(t, { caps: { inputBytes: 10_000 } });
    const ops = operations(t);
    const err = await refusal(ops.startWorkflow('alice', { name: 'big', flow: gated(), input: { text: 'x'.repeat(20_000) } }));
    expect(err.code).toBe('invalid_input');
    expect(err.message).toMatch(/input is 200\d\d bytes as JSON, above caps\.inputBytes \(10000 bytes\)/);
    expect(await t.q('SELECT id FROM stepd.workflows')).toEqual([]);
  });

  it('cancels an active workflow once; a second cancel is refused', async () => {
    const t = await createTestSchema();
    const ops = operations(t);
    const { workflowId } = await ops.startWorkflow('alice', { name: 'c', flow: gated() });
    expect(await ops.cancelWorkflow('alice', { workflowId })).toMatchObject({ workflowId, status: 'cancelled' });
    expect((await getWorkflow(t, workflowId)).status).toBe('cancelled');
    const err = await refusal(ops.cancelWorkflow('alice', { workflowId }));
    expect(err).toMatchObject({ code: 'refused', message: `workflow ${workflowId} (c) is already cancelled; only a new or running workflow can be cancelled` });
    expect((await ops.listWorkflows('alice', { status: 'cancelled' })).map((w) => w.id)).toEqual([workflowId]);
    await ops.startWorkflow('bob', { name: 'c', flow: gated() });
    expect((await ops.listWorkflows('alice', { createdBy: 'alice' })).map((w) => [w.id, w.createdBy, w.parentId])).toEqual([[workflowId, 'alice', null]]);
  });
});
