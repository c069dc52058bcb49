/**
 * Per-tool and per-user limits through the whole executor, measured by the test MCP servers:
 * never more running at once than the limit, held-back steps stay ready without spending an
 * attempt, and they do not block other steps behind them.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../../src/events.js';
import type { LimitsConfig } from '../../src/configFile.js';
import { createLimitPolicy } from '../../src/tools/limits.js';
import { createMcpProviders } from '../../src/tools/mcp/index.js';
import { startHttpMcpServer, type HttpMcpServer } from '../mcp-servers/http-server.js';
import { callsOf, eventsOf, stdioServerFixture, type StdioServerFixture } from '../mcp-servers/fixtures.js';
import { silentLogger } from '../tools/helpers.js';
import { ProbeTools } from '../helpers/probe.js';
import {
  createTestSchema,
  getSteps,
  getWorkflow,
  insertWorkflow,
  onCleanup,
  startExecutor,
  waitFor,
  waitForWorkflow,
  type TestSchema,
} from '../helpers/db.js';

async function setup(limits: LimitsConfig): Promise<{ t: TestSchema; kb: StdioServerFixture; web: HttpMcpServer }> {
  const t = await createTestSchema();
  const web = await startHttpMcpServer();
  onCleanup(() => web.close());
  const kb = stdioServerFixture();
  const providers = createMcpProviders({ kb: kb.config, web: { url: web.url } }, { log: silentLogger(), idleMs: 60_000 });
  onCleanup(async () => {
    await Promise.all(providers.map((p) => p.close()));
    await waitFor(() => kb.allExited(), 'the stdio test servers to exit');
  });
  await startExecutor(t, { tools: providers, limits: createLimitPolicy(limits) });
  return { t, kb, web };
}

/** A forEach over `input.items`, each item one call of `tool`; the join collects the results. */
function fanOut(tool: string, args: unknown, concurrency = 8) {
  return {
    start: 'each',
    steps: {
      each: { forEach: { items: '{{input.items}}', step: 'call', concurrency }, join: 'collect' },
      call: { tool, args },
      collect: { tool: 'core.echo', args: { results: '{{results}}' }, done: true },
    },
  };
}

/** The most calls of the `concurrency` tool that a server saw running at once. */
function maxConcurrent(server: StdioServerFixture | HttpMcpServer): number {
  if ('stats' in server) return server.stats.max;
  return Math.max(0, ...callsOf(server.events(), 'concurrency').map((e) => Number(e.current)));
}

async function stepsOf(t: TestSchema, id: string, name: string) {
  return (await getSteps(t, id)).filter((s) => s.name === name);
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Collects this schema's lifecycle events from `stepd_events`, as any other service would. */
async function listenForEvents(t: TestSchema): Promise<StepdEvent[]> {
  const events: StepdEvent[] = [];
  const client = new pg.Client({ connectionString: t.url });
  await client.connect();
  onCleanup(() => client.end());
  client.on('notification', (n) => {
    const event = n.payload === undefined ? undefined : parseEvent(n.payload);
    if (event?.schema === t.schema) events.push(event);
  });
  await client.query(`LISTEN ${EVENTS_CHANNEL}`);
  return events;
}

describe('limits', () => {
  it.each(['kb', 'web'] as const)('never runs more than the per-tool limit at once, and every step completes (%s)', async (name) => {
    const s = await setup({ tools: { [`${name}.concurrency`]: 2 } });
    const id = await insertWorkflow(s.t, fanOut(`${name}.concurrency`, { ms: 100 }), { items: items(8) }, { user: 'alice' });
    const wf = await waitForWorkflow(s.t, id);
    expect(wf.status).toBe('completed');
    expect((wf.output as { results: unknown[] }).results).toHaveLength(8);
    const server = name === 'kb' ? s.kb : s.web;
    expect(callsOf(eventsOf(server), 'concurrency')).toHaveLength(8);
    expect(maxConcurrent(server)).toBeGreaterThanOrEqual(1);
    expect(maxConcurrent(server)).toBeLessThanOrEqual(2);
    // Concurrent steps share one connection: one server process, one HTTP session.
    expect(name === 'kb' ? s.kb.pids().length : s.web.stats.sessionsOpened).toBe(1);
    // Held back by the limit is not an attempt: each item ran once, as attempt 1.
    expect((await stepsOf(s.t, id, 'call')).map((x) => [x.status, x.attempt])).toEqual(items(8).map(() => ['done', 1]));
  });

  it('never announces step.started for a step held back by a limit: each item starts once', async () => {
    const s = await setup({ tools: { 'web.concurrency': 2 } });
    const events = await listenForEvents(s.t);
    const id = await insertWorkflow(s.t, fanOut('web.concurrency', { ms: 50 }), { items: items(8) }, { user: 'alice' });
    expect((await waitForWorkflow(s.t, id)).status).toBe('completed');
    await waitFor(() => events.some((e) => e.type === 'workflow.completed'), 'the workflow.completed event');
    const started = events.filter((e) => e.type === 'step.started' && e.step === 'call');
    expect(callsOf(s.web.stats.events, 'concurrency')).toHaveLength(8);
    expect(started.map((e) => e.itemIndex).sort()).toEqual(items(8));
  });

  it("never runs more than a user's limit at once, across that user's workflows", async () => {
    const { t, web } = await setup({ users: { bob: 1 } });
    const a = await insertWorkflow(t, fanOut('web.concurrency', { ms: 50 }), { items: items(3) }, { user: 'bob' });
    const b = await insertWorkflow(t, fanOut('web.concurrency', { ms: 50 }), { items: items(3) }, { user: 'bob' });
    expect((await waitForWorkflow(t, a)).status).toBe('completed');
    expect((await waitForWorkflow(t, b)).status).toBe('completed');
    expect(callsOf(web.stats.events, 'concurrency')).toHaveLength(6);
    expect(web.stats.max).toBe(1);
  });

  it('keeps steps held back by a tool limit ready while a step of another tool behind them completes', async () => {
    const { t, web } = await setup({ tools: { 'web.sleep': 1 } });
    const limited = await insertWorkflow(t, fanOut('web.sleep', { ms: 60_000 }), { items: items(3) }, { user: 'alice' });
    await waitFor(async () => {
      const calls = await stepsOf(t, limited, 'call');
      return calls.filter((x) => x.status === 'running').length === 1 && calls.filter((x) => x.status === 'ready').length === 2;
    }, 'one sleep to run and two to wait');

    const other = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'web.echo', args: { n: 1 }, next: 'b' }, b: { tool: 'kb.echo', args: { n: 2 } } } }, {}, { user: 'alice' });
    const done = await waitForWorkflow(t, other);
    expect(done.status).toBe('completed');

    const calls = await stepsOf(t, limited, 'call');
    expect(calls.map((x) => x.status).sort()).toEqual(['ready', 'ready', 'running']);
    expect(calls.every((x) => x.attempt === 1)).toBe(true);
    expect(callsOf(web.stats.events, 'sleep')).toHaveLength(1);

    // Cancelling frees the slot: the running call is aborted at the server, the waiting ones never start.
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [limited]);
    await waitFor(() => web.stats.events.some((e) => e.event === 'cancelled' && e.tool === 'sleep'), 'the running sleep to be cancelled');
    expect((await getWorkflow(t, limited)).status).toBe('cancelled');
    expect((await stepsOf(t, limited, 'call')).map((x) => x.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
  });

  it("keeps a user's steps ready at their limit while another user's steps run, then runs them when a slot frees", async () => {
    const { t, web } = await setup({ users: { bob: 1 } });
    const busy = await insertWorkflow(t, { start: 's', steps: { s: { tool: 'web.sleep', args: { ms: 60_000 } } } }, {}, { user: 'bob' });
    await waitFor(() => callsOf(web.stats.events, 'sleep').length === 1, "bob's sleep to reach the server");
    const waiting = await insertWorkflow(t, { start: 'e', steps: { e: { tool: 'core.echo', args: { who: 'bob' } } } }, {}, { user: 'bob' });
    const other = await insertWorkflow(t, { start: 'e', steps: { e: { tool: 'web.echo', args: { who: 'carol' } } } }, {}, { user: 'carol' });

    expect((await waitForWorkflow(t, other)).output).toEqual({ who: 'carol' });
    const held = await waitFor(async () => (await getSteps(t, waiting))[0], "bob's second workflow to be admitted");
    expect(held).toMatchObject({ status: 'ready', attempt: 1 });

    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [busy]);
    const wf = await waitForWorkflow(t, waiting);
    expect(wf).toMatchObject({ status: 'completed', output: { who: 'bob' } });
    expect((await getSteps(t, waiting)).map((x) => [x.status, x.attempt])).toEqual([['done', 1]]);
  });

  describe('across executors', () => {
    /** Two executors on one schema, each with its own policy (as two processes would have), one shared probe. */
    async function twoExecutors(limits: LimitsConfig): Promise<{ t: TestSchema; probe: ProbeTools }> {
      const t = await createTestSchema();
      const probe = new ProbeTools();
      for (const id of ['one', 'two']) await startExecutor(t, { tools: [probe], concurrency: 8, executorId: id, limits: createLimitPolicy(limits) });
      return { t, probe };
    }

    const probeFanOut = (n: number) => [fanOut('probe.hold', { ms: 20 }, n), { items: items(n) }] as const;

    it('holds a per-tool limit summed over every executor on the database', async () => {
      const { t, probe } = await twoExecutors({ tools: { 'probe.*': 2 } });
      const ids = await Promise.all([1, 2, 3].map(() => insertWorkflow(t, ...probeFanOut(6), { user: 'alice' })));
      for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
      expect(probe.calls).toBe(18);
      // Both executors compete with 8 free slots each; which of them runs the calls is up to timing.
      expect(probe.max).toBe(2);
    });

    it('holds the global limit (limits.concurrency) over every executor, whatever each one may run', async () => {
      const { t, probe } = await twoExecutors({ concurrency: 3 });
      const ids = await Promise.all([1, 2, 3].map(() => insertWorkflow(t, ...probeFanOut(6), { user: 'alice' })));
      for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
      expect(probe.calls).toBe(18);
      expect(probe.max).toBe(3);
    });

    it('gives users not named under limits.users the defaultUser limit, each on their own', async () => {
      const { t, probe } = await twoExecutors({ users: { vip: 4 }, defaultUser: 1 });
      const ids = await Promise.all(
        ['zed', 'zed', 'amy', 'vip'].map((user) => insertWorkflow(t, ...probeFanOut(4), { user })),
      );
      for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
      expect(probe.calls).toBe(16);
      expect(probe.byUser.get('zed')!.max).toBe(1);
      expect(probe.byUser.get('amy')!.max).toBe(1);
      expect(probe.byUser.get('vip')!.max).toBeLessThanOrEqual(4);
      expect(probe.max).toBeGreaterThanOrEqual(2);
    });
  });
});
