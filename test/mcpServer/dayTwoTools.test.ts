/**
 * fork_workflow, cancel_workflows and retry_workflows over MCP (an in-memory transport to the
 * real server, the real database, an executor in-process): as a user, on its own workflows.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import { Operations } from '../../src/api/operations.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createMcpServer } from '../../src/mcpServer/createMcpServer.js';
import { addSchedule } from '../../src/schedules/scheduleStore.js';
import { createTestSchema, getWorkflow, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { call, ok } from './scenario.js';

async function clientAs(t: TestSchema, user: string): Promise<Client> {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 2 });
  const db = createKysely(pool);
  onCleanup(() => db.destroy());
  const server = createMcpServer(new Operations({ pool, db, schema: t.schema }), user);
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(b);
  onCleanup(() => client.close());
  return client;
}

const CHAIN = {
  start: 'fetch',
  steps: {
    fetch: { tool: 'core.echo', args: { rows: '{{input.rows}}' }, next: 'publish' },
    publish: { tool: 'core.echo', args: { published: '{{steps.fetch.result.rows}}' }, done: true, output: '{{result}}' },
  },
};
const GATE = { start: 'wait', steps: { wait: { approval: true, done: true } } };

describe('MCP day-two tools', () => {
  it('fork_workflow re-runs from a step with a corrected result; another user is refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, CHAIN, { rows: 1 }, { user: 'alice' });
    await waitForWorkflow(t, id);
    const alice = await clientAs(t, 'alice');
    const forked = await ok(alice, 'fork_workflow', { workflowId: id, fromStep: 'publish', results: { fetch: { rows: 3 } } });
    expect(forked).toMatchObject({ forkedFrom: id, fromStep: 'publish' });
    expect((await waitForWorkflow(t, forked.workflowId as string)).output).toEqual({ published: 3 });
    const bob = await call(await clientAs(t, 'bob'), 'fork_workflow', { workflowId: id });
    expect(bob.isError).toBe(true);
    expect(bob.structuredContent).toMatchObject({ error: { code: 'permission_denied' } });
  });

  it('cancel_workflows with dryRun lists, then cancels the user\'s own; retry_workflows redrives the failed ones', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const mine = await insertWorkflow(t, GATE, {}, { name: 'job', user: 'alice' });
    const theirs = await insertWorkflow(t, GATE, {}, { name: 'job', user: 'bob' });
    await waitForStep(t, mine, 'wait', 'pending');
    await waitForStep(t, theirs, 'wait', 'pending');
    const alice = await clientAs(t, 'alice');
    const dry = await ok(alice, 'cancel_workflows', { name: 'job', dryRun: true });
    expect((dry.workflows as { workflowId: string }[]).map((w) => w.workflowId)).toEqual([mine]);
    expect((await getWorkflow(t, mine)).status).toBe('running');
    await ok(alice, 'cancel_workflows', { name: 'job' });
    expect((await getWorkflow(t, mine)).status).toBe('cancelled');
    expect((await getWorkflow(t, theirs)).status).toBe('running');
    const other = await call(alice, 'cancel_workflows', { user: 'bob' });
    expect(other.structuredContent).toMatchObject({ error: { code: 'permission_denied' } });

    const failing = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } }, {}, { name: 'flaky', user: 'alice' });
    await waitForWorkflow(t, failing);
    const retried = await ok(alice, 'retry_workflows', { name: 'flaky' });
    expect((retried.workflows as unknown[]).length).toBe(1);
    await waitFor(async () => (await getWorkflow(t, failing)).redrives === 1, 'the redrive');
  });

  it('list_schedules lists each schedule with its next tick, none while paused; with none it says how to add one', async () => {
    const t = await createTestSchema();
    const alice = await clientAs(t, 'alice');
    const empty = await call(alice, 'list_schedules');
    expect(empty.structuredContent).toEqual({ schedules: [] });
    expect(empty.content[0]?.text).toMatch(/^no schedules \(add one with: stepd schedule add/);
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(CHAIN)]);
    const conn = await t.db.connect();
    try {
      await conn.query(`SET search_path TO ${t.schema}`);
      await addSchedule(conn, t.schema, { name: 'nightly', cron: '0 2 * * *', tz: 'Europe/Paris', flow: 'report', input: { rows: 2 }, createdBy: 'alice' });
      await addSchedule(conn, t.schema, { name: 'hourly', cron: '0 * * * *', tz: 'UTC', flow: 'report', input: {}, createdBy: null, overlap: 'skip' });
    } finally {
      conn.release();
    }
    await t.q(`UPDATE stepd.schedules SET paused = true WHERE name = 'hourly'`);
    const listed = await call(alice, 'list_schedules');
    const schedules = (listed.structuredContent as { schedules: Record<string, unknown>[] }).schedules;
    expect(schedules.map((v) => v.name)).toEqual(['hourly', 'nightly']);
    expect(schedules[0]).toMatchObject({ cron: '0 * * * *', tz: 'UTC', flow: 'report', overlap: 'skip', paused: true, next: null });
    expect(schedules[1]).toMatchObject({ cron: '0 2 * * *', tz: 'Europe/Paris', input: { rows: 2 }, user: 'alice', paused: false });
    const next = new Date(schedules[1]!.next as string);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect(next.toLocaleString('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit' })).toBe('02:00');
    expect(listed.content[0]?.text).toContain('nightly "0 2 * * *" (Europe/Paris) flow report, next 2');
    expect(listed.content[0]?.text).toContain('hourly "0 * * * *" (UTC) flow report, next paused');
  });
});
