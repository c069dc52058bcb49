import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../../src/events.js';
import { createTestSchema, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

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

describe('lifecycle events', () => {
  it('announces every transition of a workflow in order, after commit', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { x: 1 }, next: 'b' }, b: { tool: 'core.noop' } } });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    await waitFor(() => events.some((e) => e.type === 'workflow.completed'), 'workflow.completed');
    const mine = events.filter((e) => e.workflowId === id).map((e) => `${e.type}${e.step ? `:${e.step}` : ''}`);
    expect(mine).toEqual(['workflow.started', 'step.started:a', 'step.done:a', 'step.started:b', 'step.done:b', 'workflow.completed']);
  });

  it('announces each workflow once and in order when one batch ends some workflows and moves others on', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    // Inserted before the executor starts: admitted together, their outcomes recorded together.
    const ends = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.noop', done: true } } });
    const moves = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.noop', next: 'b' }, b: { tool: 'core.echo', args: { x: 1 }, done: true } } });
    const fails = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'no' } } } });
    await startExecutor(t);
    for (const id of [ends, moves, fails]) await waitForWorkflow(t, id);
    const of = (id: string) => events.filter((e) => e.workflowId === id).map((e) => `${e.type}${e.step ? `:${e.step}` : ''}`);
    await waitFor(() => of(fails).includes('workflow.failed') && of(ends).includes('workflow.completed') && of(moves).includes('workflow.completed'), 'every end announced');
    expect(of(ends)).toEqual(['workflow.started', 'step.started:a', 'step.done:a', 'workflow.completed']);
    expect(of(moves)).toEqual(['workflow.started', 'step.started:a', 'step.done:a', 'step.started:b', 'step.done:b', 'workflow.completed']);
    expect(of(fails)).toEqual(['workflow.started', 'step.started:a', 'step.failed:a', 'workflow.failed']);
  });

  it('fails a step whose error is larger than a NOTIFY payload like any other, announcing it trimmed', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await startExecutor(t);
    const message = 'x'.repeat(20_000);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { message } } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    // Stored cut to 1 kB (storedError.ts), with a marker of the full length.
    expect(Buffer.byteLength(wf.error!.message, 'utf8')).toBeLessThanOrEqual(1024);
    expect(wf.error!.message).toMatch(/^x+… \(cut: 20000 characters in all\)$/);
    const failed = await waitFor(() => events.find((e) => e.type === 'step.failed' && e.workflowId === id), 'the step.failed event');
    expect(failed.error?.code).toBe('failed');
    expect(failed.error!.message.length).toBeLessThan(message.length);
  });

  it('carries quotes, backslashes, control characters and emoji in a payload exactly as sent (payloads travel as one JSON array)', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await startExecutor(t);
    const message = 'a "quoted" \\ back\\slash, a tab\t, \u0001, a line\u2028separator, 😀 and ] , [ {"not": "json"}';
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { message, code: 'odd"code\\' } } } });
    expect((await waitForWorkflow(t, id)).status).toBe('failed');
    const failed = await waitFor(() => events.find((e) => e.type === 'step.failed' && e.workflowId === id), 'the step.failed event');
    expect(failed.error).toEqual({ code: 'odd"code\\', message });
    await waitFor(() => events.some((e) => e.type === 'workflow.failed' && e.workflowId === id), 'workflow.failed');
    expect(events.filter((e) => e.workflowId === id).map((e) => e.type)).toEqual(['workflow.started', 'step.started', 'step.failed', 'workflow.failed']);
  });
});
