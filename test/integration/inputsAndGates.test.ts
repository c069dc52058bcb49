import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../../src/events.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

async function listen(t: TestSchema): Promise<StepdEvent[]> {
  const client = new pg.Client({ connectionString: t.url });
  await client.connect();
  onCleanup(() => client.end());
  const events: StepdEvent[] = [];
  client.on('notification', (msg) => {
    const e = msg.payload ? parseEvent(msg.payload) : undefined;
    if (e && e.schema === t.schema) events.push(e);
  });
  await client.query(`LISTEN ${EVENTS_CHANNEL}`);
  return events;
}

/** A login role holding <schema>_client: a service driving the contract. */
async function clientLogin(t: TestSchema): Promise<{ role: string; pool: pg.Pool }> {
  const role = `r_${randomBytes(5).toString('hex')}`;
  await t.db.query(`CREATE ROLE ${role} LOGIN`);
  await t.db.query(`GRANT ${t.schema}_client TO ${role}`);
  const url = new URL(t.url);
  url.username = role;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
  onCleanup(async () => {
    await pool.end();
    await t.db.query(`DROP OWNED BY ${role}`).catch(() => {});
    await t.db.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
  });
  return { role, pool };
}

const readyAs = (db: pg.Pool, schema: string, stepId: string, result: unknown, by: string | null) =>
  db.query(`UPDATE ${schema}.workflow_steps SET status = 'ready', result = $2, readied_by = $3 WHERE id = $1 AND status = 'pending'`, [
    stepId,
    result === undefined ? null : JSON.stringify(result),
    by,
  ]);

const echo = { tool: 'core.echo', args: { topic: '{{input.topic}}' }, done: true, output: '{{result}}' };

describe('inputSchema at admission', () => {
  it('fails a workflow whose input does not match with invalid_input, every issue with its path, before any step; a matching one runs', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      inputSchema: { type: 'object', required: ['topic'], properties: { topic: { type: 'string' }, depth: { type: 'integer', minimum: 1 } } },
      start: 'say',
      steps: { say: echo },
    };
    const bad = await insertWorkflow(t, flow, { depth: 0 });
    const good = await insertWorkflow(t, flow, { topic: 'ok', depth: 2 });
    const wf = await waitForWorkflow(t, bad);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({
      code: 'invalid_input',
      issues: [
        { path: 'input.topic', message: 'is required' },
        { path: 'input.depth', message: 'must be >= 1' },
      ],
    });
    expect(await getSteps(t, bad)).toEqual([]);
    expect(await waitForWorkflow(t, good)).toMatchObject({ status: 'completed', output: { topic: 'ok' } });
  });
});

const gated = (approval: Record<string, unknown>) => ({
  start: 'ask',
  steps: {
    ask: { approval, next: 'act' },
    act: { tool: 'core.echo', args: { decision: '{{step.ask}}' }, done: true, output: '{{result.decision}}' },
  },
});

describe('gates: approval.message', () => {
  it('renders the message when the gate starts waiting: in the row args, and in the step.waiting event with the step id', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await startExecutor(t);
    const id = await insertWorkflow(t, gated({ message: 'Spend {{input.amount}} EUR on {{input.what}}?', approvers: ['alice', 'ops-*'] }), { amount: 120, what: 'GPUs' });
    const gate = await waitForStep(t, id, 'ask', 'pending');
    expect(gate.args).toEqual({ message: 'Spend 120 EUR on GPUs?', approvers: ['alice', 'ops-*'] });
    const waiting = await waitFor(() => events.find((e) => e.type === 'step.waiting' && e.workflowId === id), 'step.waiting');
    expect(waiting).toMatchObject({ stepId: gate.id, step: 'ask', message: 'Spend 120 EUR on GPUs?' });
    await readyAs(t.db, t.schema, gate.id, { approved: true, note: 'ok' }, 'ops-bob');
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { approved: true, note: 'ok' } });
  });
});

describe('gates: approval.schema', () => {
  it('refuses a readying whose data does not match, with paths: the gate waits again, visibly, until a valid one', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await startExecutor(t);
    const schema = { type: 'object', required: ['budget'], properties: { budget: { type: 'integer', maximum: 500 }, approved: { type: 'boolean' } } };
    const id = await insertWorkflow(t, gated({ schema }));
    const gate = await waitForStep(t, id, 'ask', 'pending');
    await readyAs(t.db, t.schema, gate.id, { approved: true, budget: 900 }, 'alice');
    const refused = await waitFor(async () => {
      const [row] = (await getSteps(t, id)).filter((s) => s.name === 'ask');
      return row && row.status === 'pending' && row.error ? row : undefined;
    }, 'the gate to wait again with its refusal');
    expect(refused.id).toBe(gate.id);
    expect(refused.result).toBeNull();
    expect(refused.readied_by).toBeNull();
    expect(refused.error).toMatchObject({ code: 'approval_refused', issues: [{ path: 'result.budget', message: 'must be <= 500' }], details: { readiedBy: 'alice' } });
    const again = await waitFor(() => events.find((e) => e.type === 'step.waiting' && e.workflowId === id && e.error), 'the step.waiting event of the refusal');
    expect(again).toMatchObject({ stepId: gate.id, error: { code: 'approval_refused' } });
    expect(again.error!.message).toContain('result.budget: must be <= 500');
    // No data at all reads as {"approved": true}: budget is missing.
    await readyAs(t.db, t.schema, gate.id, undefined, 'alice');
    await waitFor(async () => {
      const [row] = await t.q(`SELECT status, error FROM stepd.workflow_steps WHERE id = $1`, [gate.id]);
      return row.status === 'pending' && row.error?.issues?.[0]?.path === 'result.budget' && row.error.issues[0].message === 'is required';
    }, 'the second refusal');
    // Valid data completes the same gate row.
    await readyAs(t.db, t.schema, gate.id, { approved: true, budget: 300 }, 'alice');
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { approved: true, budget: 300 } });
    const done = (await getSteps(t, id)).find((s) => s.name === 'ask')!;
    expect(done).toMatchObject({ status: 'done', error: null, attempt: 1 });
  });

  it('lets a rejection through whatever the schema: the gate fails with rejected', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, gated({ schema: { type: 'object', required: ['budget'] } }));
    const gate = await waitForStep(t, id, 'ask', 'pending');
    await readyAs(t.db, t.schema, gate.id, { approved: false, reason: 'no' }, 'alice');
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'failed', error: { code: 'rejected' } });
  });
});

describe('gates: approval.approvers', () => {
  it('refuses a readying by a user not listed, and one by a client role acting as a listed user it may not act as; accepts a role acting as itself or as allowed', async () => {
    const t = await createTestSchema();
    const app = await clientLogin(t);
    const other = await clientLogin(t);
    await startExecutor(t, { clients: { [app.role]: { actAs: ['boss'] } } });
    const id = await insertWorkflow(t, gated({ approvers: ['boss', other.role] }));
    const gate = await waitForStep(t, id, 'ask', 'pending');
    const refusal = () =>
      waitFor(async () => {
        const [row] = await t.q(`SELECT status, error FROM stepd.workflow_steps WHERE id = $1`, [gate.id]);
        return row.status === 'pending' && row.error ? row.error : undefined;
      }, 'a refusal');

    // Not an approver (the superuser may act as anyone, but "mallory" is not listed).
    await readyAs(t.db, t.schema, gate.id, undefined, 'mallory');
    expect((await refusal()).message).toContain('user "mallory" is not among the approvers of this gate (boss, ' );
    // A listed user, but written by a role that may not act as them.
    await readyAs(other.pool, t.schema, gate.id, undefined, 'boss');
    const denied = await waitFor(async () => {
      const [row] = await t.q(`SELECT status, error FROM stepd.workflow_steps WHERE id = $1`, [gate.id]);
      return row.status === 'pending' && row.error?.details?.readiedRole === other.role ? row.error : undefined;
    }, 'the refusal of the other role');
    expect(denied.message).toContain(`database role "${other.role}" may not act as user "boss"`);
    // The role allowed to act as boss (clients.actAs) approves.
    await readyAs(app.pool, t.schema, gate.id, { approved: true, by: 'boss' }, 'boss');
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { approved: true, by: 'boss' } });
  });

  it('accepts a client role approving as itself when it is listed', async () => {
    const t = await createTestSchema();
    const app = await clientLogin(t);
    await startExecutor(t);
    const id = await insertWorkflow(t, gated({ approvers: [app.role] }));
    const gate = await waitForStep(t, id, 'ask', 'pending');
    await readyAs(app.pool, t.schema, gate.id, undefined, null);
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { approved: true } });
  });
});
