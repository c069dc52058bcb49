/**
 * A running step's progress on its row and as step.progress events: a chatty MCP server cannot
 * flood the database (throttled, the last value always written), only the attempt that runs
 * under its executor is written, and nobody else may set it.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { recordProgressIfRunning } from '../../src/db/queries.js';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../../src/events.js';
import { createMcpProviders } from '../../src/tools/mcp/index.js';
import { stdioServerFixture } from '../mcp-servers/fixtures.js';
import { silentLogger } from '../tools/helpers.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

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

/** A schema, the stdio test server as `kb`, and an executor; returns its id too. */
async function setup() {
  const t = await createTestSchema();
  const kb = stdioServerFixture();
  const providers = createMcpProviders({ kb: kb.config }, { log: silentLogger(), idleMs: 60_000 });
  onCleanup(async () => {
    await Promise.all(providers.map((p) => p.close()));
    await waitFor(() => kb.allExited(), 'the stdio test server to exit');
  });
  const executorId = `progress-${Math.random().toString(16).slice(2, 10)}`;
  await startExecutor(t, { tools: providers, executorId });
  return { t, executorId };
}

describe('step progress', () => {
  it('keeps the latest progress of a chatty server on the step row, with a few step.progress events, the last one always', async () => {
    const { t } = await setup();
    const events = await listen(t);
    const id = await insertWorkflow(t, { start: 'crunch', steps: { crunch: { tool: 'kb.progress', args: { count: 500, ms: 700 }, done: true } } }, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const [step] = await getSteps(t, id);
    expect(step?.progress).toEqual({ progress: 500, total: 500, message: 'item 500' });
    const progress = events.filter((e) => e.type === 'step.progress' && e.workflowId === id);
    // 500 reports within a few ms: the first is written at once, the last at the end of the interval.
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress.length).toBeLessThan(10);
    expect(progress.at(-1)).toMatchObject({ step: 'crunch', stepId: step?.id, attempt: 1, progress: { progress: 500, total: 500, message: 'item 500' } });
    // Announced before the step finished, never after.
    const types = events.filter((e) => e.workflowId === id).map((e) => e.type);
    expect(types.lastIndexOf('step.progress')).toBeLessThan(types.indexOf('step.done'));
  });

  it('writes progress only for the attempt running under this executor, and never after it finished', async () => {
    const { t, executorId } = await setup();
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor' });
    onCleanup(() => pool.end());
    const id = await insertWorkflow(t, { start: 'wait', steps: { wait: { tool: 'kb.sleep', args: { ms: 60_000 }, done: true } } }, {}, { user: 'alice' });
    const running = await waitFor(async () => (await getSteps(t, id)).find((s) => s.status === 'running'), 'the step to run');
    const write = (executor: string, progress: number) =>
      recordProgressIfRunning(pool, { stepId: running.id, executorId: executor, progress: { progress }, notify: null });

    expect(await write('someone-else', 1)).toBe(false);
    expect(await write(executorId, 2)).toBe(true);
    expect((await getSteps(t, id))[0]?.progress).toEqual({ progress: 2 });

    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    await waitFor(async () => (await getSteps(t, id))[0]?.status === 'cancelled', 'the step to be cancelled');
    expect(await write(executorId, 3)).toBe(false);
    expect((await getSteps(t, id))[0]?.progress).toEqual({ progress: 2 });
  });

  it('refuses progress written by anyone but the executor, and a progress that is not a number', async () => {
    const { t, executorId } = await setup();
    const id = await insertWorkflow(t, { start: 'wait', steps: { wait: { tool: 'kb.sleep', args: { ms: 60_000 }, done: true } } }, {}, { user: 'alice' });
    const running = await waitFor(async () => (await getSteps(t, id)).find((s) => s.status === 'running'), 'the step to run');
    await expect(t.q(`UPDATE stepd.workflow_steps SET progress = '{"progress": 1}' WHERE id = $1`, [running.id])).rejects.toThrow(/^stepd: /);
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor' });
    onCleanup(() => pool.end());
    await expect(
      pool.query(`UPDATE workflow_steps SET progress = '{"progress": "half"}' WHERE id = $1 AND executor_id = $2`, [running.id, executorId]),
    ).rejects.toThrow(/workflow_steps_progress_is_object/);
  });
});
