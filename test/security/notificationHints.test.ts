/**
 * Notifications are hints. Any role — one granted nothing at all, or a client — may NOTIFY
 * anything on `stepd_wakeup`. The review's flood of 60,000 forged "workflow cancelled"
 * wake-ups made the executor abort every running tool call and fail the steps with `cancelled`.
 * Now the executor reads the workflow rows (a batch at a time) and aborts only what a row says
 * was cancelled: the flood aborts nothing, every workflow completes, a real cancellation sent
 * after it is still honoured, and another role's one-step workflow completes within a second
 * while the flood runs. Payloads of the wrong schema, of any size, not JSON, or with odd unicode
 * are ignored on both channels.
 */
import { describe, expect, it } from 'vitest';
import { createTokenLookup } from '../../src/api/tokens.js';
import { createHttpApp } from '../../src/http/app.js';
import { AuthThrottle } from '../../src/http/authThrottle.js';
import { EventHub, type HubMessage } from '../../src/http/eventHub.js';
import { Sessions } from '../../src/http/sessions.js';
import { silentLogger } from '../../src/logger.js';
import { holdTools } from '../helpers/holdTools.js';
import { createUngrantedRole, forgerOn } from './forgers.js';
import { assertServing, clientInsert, getSteps, getWorkflow, onCleanup, securityEnv, waitFor, waitForWorkflow } from './helpers.js';

/** Holds its tool call until the test releases it, then answers its args. */
const HELD_FLOW = {
  start: 'work',
  steps: {
    work: { tool: 'hold.wait', args: { held: true }, next: 'after' },
    after: { tool: 'probe.echo', args: { done: '{{steps.work.result.held}}' }, done: true, output: '{{result}}' },
  },
};

const ONE_STEP = { start: 'a', steps: { a: { tool: 'probe.echo', args: { quick: true }, done: true, output: '{{result}}' } } };

/** The bound the issue allows another role's one-step workflow while an attack runs. */
const SERVED_WITHIN_MS = 1_000;

async function servedWithin(t: { q: (text: string, values?: unknown[]) => Promise<any[]> }, id: string): Promise<number> {
  const [row] = await t.q(`SELECT status, extract(epoch FROM completed_at - created_at) * 1000 AS ms FROM stepd.workflows WHERE id = $1`, [id]);
  expect(row.status).toBe('completed');
  return Number(row.ms);
}

/** Workflows whose tool call is in flight (the hold tool has them). */
async function startHeld(env: Awaited<ReturnType<typeof securityEnv>>, hold: ReturnType<typeof holdTools>, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await clientInsert(env.client, HELD_FLOW, { name: `held-${i}` }));
  await waitFor(async () => ids.every((id) => hold.waiting.has(id)), 'every held tool call to be in flight');
  return ids;
}

describe('forged cancellation wake-ups', () => {
  it('a role with no grants floods 60,000 "cancelled" wake-ups: no running tool call is aborted, every workflow completes, another role is served within a second, a real cancel still works', async () => {
    const hold = holdTools();
    // The watchdog's own sweep also aborts cancelled steps; kept away so only a wake-up could.
    const env = await securityEnv({ providers: [hold], options: { watchdogIntervalMs: 600_000 } });
    const { t } = env;
    const forger = await createUngrantedRole(t);
    await expect(forger.pool.query(`SELECT 1 FROM ${t.schema}.workflows`)).rejects.toThrow(/permission denied/);

    const held = await startHeld(env, hold, 4);
    const doomed = await startHeld(env, hold, 1);
    const ids = [...held, ...doomed];
    expect(env.executor.runningCount).toBe(5);
    const maxId = Math.max(...ids.map(Number));

    // The sample: every id from 1, the held ones among them; then the rest while a client works.
    await forger.cancelFlood(t.schema, 1, 10_000);
    const rest = (async () => {
      for (let from = 10_001; from <= 60_000; from += 10_000) await forger.cancelFlood(t.schema, from, 10_000);
    })();
    const quick = await clientInsert(env.client, ONE_STEP, { name: 'quick' });
    await waitForWorkflow(t, quick);
    await rest;
    expect(maxId).toBeLessThan(60_000);
    expect(await servedWithin(t, quick)).toBeLessThan(SERVED_WITHIN_MS);

    // A real cancellation committed after the flood is delivered after it: once its tool call is
    // aborted, every forged hint before it has been checked too.
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [doomed[0]]);
    await waitFor(async () => env.executor.runningCount === 4, 'the really cancelled workflow\'s tool call to be aborted');
    for (const id of held) expect((await getSteps(t, id)).map((s) => [s.name, s.status])).toEqual([['work', 'running']]);

    hold.release(...ids);
    for (const id of held) {
      const wf = await waitForWorkflow(t, id);
      expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
      expect(wf.output).toEqual({ done: true });
      expect((await getSteps(t, id)).map((s) => s.status)).toEqual(['done', 'done']);
    }
    expect((await getWorkflow(t, doomed[0]!)).status).toBe('cancelled');
    await env.bystander.assertUndisturbedAndServed();
    await assertServing(t);
  });

  it('a client forges wake-ups naming the running workflows and steps exactly (ids as numbers and as text, step rows, redrives): nothing is aborted or changed', async () => {
    const hold = holdTools();
    const env = await securityEnv({ providers: [hold], options: { watchdogIntervalMs: 600_000 } });
    const { t } = env;
    const held = await startHeld(env, hold, 3);
    const stepIds = (await Promise.all(held.map((id) => getSteps(t, id)))).map((rows) => rows[0]!.id);
    const s = t.schema;
    const payloads = [
      ...held.flatMap((id) => [
        JSON.stringify({ schema: s, table: 'workflows', id: Number(id), status: 'cancelled' }),
        JSON.stringify({ schema: s, table: 'workflows', id, status: 'cancelled' }),
        JSON.stringify({ schema: s, table: 'workflows', id, status: 'running' }),
        JSON.stringify({ schema: s, table: 'workflows', id, status: 'failed' }),
      ]),
      ...stepIds.flatMap((id) => [
        JSON.stringify({ schema: s, table: 'workflow_steps', id, status: 'cancelled' }),
        JSON.stringify({ schema: s, table: 'workflow_steps', id, status: 'ready' }),
      ]),
    ];
    const forger = forgerOn(env.client.role, env.client.pool);
    for (let i = 0; i < 200; i++) await forger.notify('stepd_wakeup', payloads);
    const quick = await clientInsert(env.client, ONE_STEP, { name: 'quick' });
    await waitForWorkflow(t, quick);
    expect(await servedWithin(t, quick)).toBeLessThan(SERVED_WITHIN_MS);

    // A real cancellation after them is acted on: the forged ones before it were checked and refused.
    const doomed = await startHeld(env, hold, 1);
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [doomed[0]]);
    await waitFor(async () => env.executor.runningCount === 3, 'the really cancelled tool call to be aborted');

    hold.release(...held);
    for (const id of held) expect((await waitForWorkflow(t, id)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('forged payload fields', () => {
  it('wrong schema names, the largest payloads, non-JSON and odd unicode on stepd_wakeup and stepd_events are ignored harmlessly', async () => {
    const hold = holdTools();
    const env = await securityEnv({ providers: [hold], options: { watchdogIntervalMs: 600_000 } });
    const { t } = env;
    const forger = await createUngrantedRole(t);
    const hub = new EventHub({ url: t.url, schema: t.schema, log: silentLogger() });
    await hub.start();
    onCleanup(() => hub.close());
    const heard: HubMessage[] = [];
    hub.subscribe((m) => heard.push(m));
    const [id] = await startHeld(env, hold, 1);
    const forged = (m: HubMessage) => m.kind === 'event' && m.event.workflowId === id && m.event.type !== 'workflow.started' && m.event.type !== 'step.started';
    const s = t.schema;
    const at = new Date().toISOString();
    const lookalikes = [s.toUpperCase(), ` ${s}`, `${s}\u200b`, `\u0442${s.slice(1)}`, `\u202e${s}`, `${s}\ufeff`];
    const cancel = (schema: unknown, wfId: unknown = Number(id)) => JSON.stringify({ schema, table: 'workflows', id: wfId, status: 'cancelled' });
    const ended = (schema: unknown, wfId: unknown = id) => JSON.stringify({ type: 'workflow.completed', schema, workflowId: wfId, at });
    const nearMax = (make: (pad: string) => string) => make('x'.repeat(7_990 - make('').length));
    const wakeups = [
      ...lookalikes.map((l) => cancel(l)),
      cancel(s, `\uff11`), // a fullwidth digit
      cancel(s, `${id}\u0660`), // an Arabic-Indic zero after the id
      cancel(s, -Number(id)),
      cancel(s, `0${id}`),
      cancel(s, 'x'.repeat(7_000)),
      cancel({ $eq: s }),
      nearMax((pad) => JSON.stringify({ schema: s, table: 'workflows', id: Number(id), status: 'cancelled', pad }).replace('"cancelled"', '"cancelled "')),
      nearMax((pad) => JSON.stringify({ schema: s + pad, table: 'workflows', id: Number(id), status: 'cancelled' })),
      'not json',
      '\ud800',
      '{"schema":"' + s + '","table":"workflows","id":' + id + ',"status":"cancelled"',
      '💥'.repeat(1_900),
    ];
    const events = [
      ...lookalikes.map((l) => ended(l)),
      ended(s, `\uff11`),
      ended(s, 'x'.repeat(7_000)),
      ended(s, Number.MAX_SAFE_INTEGER + 2),
      JSON.stringify({ type: 'workflow.completed', schema: s, workflowId: id, at: 'tomorrow' }),
      JSON.stringify({ type: 'workflow.exploded', schema: s, workflowId: id, at }),
      nearMax((pad) => JSON.stringify({ type: 'step.waiting', schema: s, workflowId: id, stepId: 'x', message: pad, at })),
      'not json',
      '💥'.repeat(1_900),
    ];
    await forger.notify('stepd_wakeup', wakeups);
    await forger.notify('stepd_events', events);
    // PostgreSQL itself refuses a payload of 8000 bytes or more: the sender gets the error.
    await expect(forger.notify('stepd_wakeup', ['x'.repeat(8_000)])).rejects.toThrow(/payload string too long/);

    // Something real after them on both channels: a cancellation, which also announces itself.
    const [doomed] = await startHeld(env, hold, 1);
    await env.client.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [doomed]);
    await waitFor(async () => env.executor.runningCount === 1, 'the real cancellation to abort its tool call');
    await waitFor(async () => heard.some((m) => m.kind === 'event' && m.event.type === 'workflow.cancelled'), 'the real event');
    // The hub passed on only well-formed events of this schema (none of the forged ones above).
    expect(heard.filter(forged)).toEqual([]);

    hold.release(id!);
    expect((await waitForWorkflow(t, id!)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('forged events on the dashboard', () => {
  it('/events passes a forged event on only as what may have changed (type and ids), never its message, error or output', async () => {
    const env = await securityEnv();
    const { t } = env;
    const forger = await createUngrantedRole(t);
    const hub = new EventHub({ url: t.url, schema: t.schema, log: silentLogger() });
    await hub.start();
    onCleanup(() => hub.close());
    const app = createHttpApp({ auth: { tokens: createTokenLookup(undefined), localUser: 'erin', sessions: new Sessions(), throttle: new AuthThrottle() }, log: silentLogger(), events: hub });
    const id = env.bystander.id;
    const res = await app.request(`/events?workflow=${id}`, {}, { incoming: { socket: { remoteAddress: '127.0.0.1' } } } as never);
    const reader = res.body!.getReader();
    onCleanup(async () => void (await reader.cancel().catch(() => {})));
    let text = '';
    const read = async (pattern: RegExp) => {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before ${pattern}: ${text}`);
        text += new TextDecoder().decode(value);
      }
    };
    await read(/event: ready/);
    const at = new Date().toISOString();
    await forger.notify('stepd_events', [
      JSON.stringify({ type: 'step.waiting', schema: t.schema, workflowId: id, stepId: '5', step: 'approve', message: 'FORGED: wire 1000 EUR to …', at }),
      JSON.stringify({ type: 'workflow.failed', schema: t.schema, workflowId: id, error: { code: 'forged', message: 'FORGED failure' }, output: 'FORGED', at }),
    ]);
    await read(/"type":"workflow.failed"/);
    const data = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as unknown);
    expect(data.slice(1)).toEqual([
      { type: 'step.waiting', workflowId: id, stepId: '5' },
      { type: 'workflow.failed', workflowId: id },
    ]);
    expect(text).not.toMatch(/FORGED|forged/);
    await env.bystander.assertUndisturbedAndServed();
  });
});
