/**
 * MCP tools through the whole executor: workflows inserted by SQL call tools on a stdio server
 * (`kb`) and a Streamable HTTP server (`web`), both real SDK servers from test/mcp-servers.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PermissionsConfig } from '../../src/configFile.js';
import { createPermissionPolicy } from '../../src/tools/permissions.js';
import { createMcpProviders } from '../../src/tools/mcp/index.js';
import { startHttpMcpServer, type HttpMcpServer } from '../mcp-servers/http-server.js';
import { callsOf, eventsOf, metaOf, stdioServerFixture, type StdioServerFixture } from '../mcp-servers/fixtures.js';
import { TINY_PNG } from '../mcp-servers/tools.js';
import { silentLogger } from '../tools/helpers.js';
import { spawnStepd, waitForLog } from '../tools/stepdProcess.js';
import {
  createTestSchema,
  getSteps,
  TEST_DATABASE_URL,
  insertWorkflow,
  onCleanup,
  startExecutor,
  waitFor,
  waitForWorkflow,
  type TestSchema,
} from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';

interface Setup {
  t: TestSchema;
  kb: StdioServerFixture;
  web: HttpMcpServer;
}

/** A fresh schema, both servers, and an executor whose registry has them as `kb` and `web`. */
async function setup(opts: { permissions?: PermissionsConfig } = {}): Promise<Setup> {
  const t = await createTestSchema();
  const web = await startHttpMcpServer();
  onCleanup(() => web.close());
  const kb = stdioServerFixture();
  const providers = createMcpProviders({ kb: kb.config, web: { url: web.url } }, { log: silentLogger(), idleMs: 60_000 });
  onCleanup(async () => {
    await Promise.all(providers.map((p) => p.close()));
    await waitFor(() => kb.allExited(), 'the stdio test servers to exit');
  });
  await startExecutor(t, { tools: providers, ...(opts.permissions ? { permissions: createPermissionPolicy(opts.permissions) } : {}) });
  return { t, kb, web };
}

const fastRetry = (maxAttempts: number) => ({ maxAttempts, initial: '10ms', max: '20ms', jitter: false });

describe('MCP tools in workflows', () => {
  it('runs one flow across the stdio and the Streamable HTTP server, each result feeding the next step', async () => {
    const { t, kb, web } = await setup();
    const flow = {
      start: 'lookup',
      steps: {
        lookup: { tool: 'kb.echo', args: { doc: { id: '{{input.id}}', title: 'Safety' } }, next: 'search' },
        search: { tool: 'web.echo', args: { q: '{{steps.lookup.result.doc.title}}', id: '{{steps.lookup.result.doc.id}}' }, next: 'report' },
        report: { tool: 'kb.echo', args: { from_kb: '{{steps.lookup.result.doc}}', from_web: '{{steps.search.result}}' }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, { id: 7 }, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ from_kb: { id: 7, title: 'Safety' }, from_web: { q: 'Safety', id: 7 } });
    expect((await getSteps(t, id)).map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['lookup', 'done', 1],
      ['search', 'done', 1],
      ['report', 'done', 1],
    ]);
    expect(callsOf(kb.events(), 'echo')).toHaveLength(2);
    expect(callsOf(web.stats.events, 'echo').map((e) => e.args)).toEqual([{ q: 'Safety', id: 7 }]);
  });

  it('maps structuredContent, JSON text and plain text into step results that templates read', async () => {
    const { t } = await setup();
    const flow = {
      start: 'structured',
      steps: {
        structured: { tool: 'web.echo', args: { hits: [{ id: 1 }, { id: 2 }] }, next: 'json_text' },
        json_text: { tool: 'kb.text', args: { text: '{"best": {"id": 2, "score": 0.9}}' }, next: 'plain_text' },
        plain_text: { tool: 'web.text', args: { parts: ['first line', 'second line'] }, next: 'use' },
        use: {
          tool: 'core.echo',
          args: {
            second: '{{steps.structured.result.hits[1].id}}',
            score: '{{steps.json_text.result.best.score}}',
            note: 'best is {{steps.json_text.result.best.id}}: {{steps.plain_text.result}}',
          },
          done: true,
        },
      },
    };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => s.result)).toEqual([
      { hits: [{ id: 1 }, { id: 2 }] },
      { best: { id: 2, score: 0.9 } },
      'first line\nsecond line',
      { second: 2, score: 0.9, note: 'best is 2: first line\nsecond line' },
    ]);
  });

  it.each(['kb', 'web'])('stores text, an image and a resource link from one result, and templates read each (%s)', async (server) => {
    const { t } = await setup();
    const flow = {
      start: 'fetch',
      steps: {
        fetch: { tool: `${server}.mixed`, next: 'use' },
        use: { tool: 'core.echo', args: { mime: '{{steps.fetch.result.content[1].mimeType}}', link: '{{steps.fetch.result.content[2].uri}}' }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps[0]?.result).toEqual({
      text: 'a pixel and a link',
      content: [
        { type: 'text', text: 'a pixel and a link' },
        { type: 'image', data: TINY_PNG, mimeType: 'image/png' },
        { type: 'resource_link', uri: 'test://docs/1', name: 'doc-1', mimeType: 'text/plain', description: 'The first document' },
      ],
    });
    expect(wf.output).toEqual({ mime: 'image/png', link: 'test://docs/1' });
  });

  it.each(['kb', 'web'])('fails the step on isError with the tool message, after one attempt only (%s)', async (server) => {
    const s = await setup();
    const flow = { start: 'f', steps: { f: { tool: `${server}.fail`, args: { message: 'no such document' }, retry: fastRetry(3) } } };
    const id = await insertWorkflow(s.t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(s.t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'tool_error', message: 'no such document', retryable: false });
    const steps = await getSteps(s.t, id);
    expect(steps.map((x) => [x.status, x.attempt, x.error?.code])).toEqual([['failed', 1, 'tool_error']]);
    expect(callsOf(eventsOf(server === 'kb' ? s.kb : s.web), 'fail')).toHaveLength(1);
  });

  it('fails a step whose stdio server died mid-call retryably, and attempt 2 runs on a reconnected server', async () => {
    const { t, kb } = await setup();
    const flow = { start: 'c', steps: { c: { tool: 'kb.crash', args: { untilAttempt: 2 }, retry: fastRetry(3), next: 'after' }, after: { tool: 'kb.echo', args: { ok: true } } } };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['c', 'failed', 1],
      ['c', 'done', 2],
      ['after', 'done', 1],
    ]);
    expect(steps[0]!.error).toMatchObject({ code: 'mcp_transport', retryable: true });
    expect(steps[1]!.result).toEqual({ survived: 2 });
    const events = kb.events();
    expect(events.filter((e) => e.event === 'crash')).toHaveLength(1);
    const pids = kb.pids();
    expect(pids).toHaveLength(2);
    expect(callsOf(events, 'crash').map((e) => [e.pid, metaOf(e).attempt])).toEqual([
      [pids[0], 1],
      [pids[1], 2],
    ]);
  });

  it.each(['kb', 'web'])('aborts the call on the step timeout, reaching the server, and retries per policy (%s)', async (server) => {
    const s = await setup();
    // The first step opens the connection (starting a stdio server takes longer than 200ms).
    const flow = {
      start: 'warm',
      steps: {
        warm: { tool: `${server}.echo`, next: 'slow' },
        slow: { tool: `${server}.sleep`, args: { ms: 30_000 }, timeout: '200ms', retry: fastRetry(2) },
      },
    };
    const id = await insertWorkflow(s.t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(s.t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'timeout', retryable: true });
    const steps = (await getSteps(s.t, id)).filter((x) => x.name === 'slow');
    expect(steps.map((x) => [x.status, x.attempt, x.error?.code])).toEqual([
      ['failed', 1, 'timeout'],
      ['failed', 2, 'timeout'],
    ]);
    const events = () => eventsOf(server === 'kb' ? s.kb : s.web);
    const cancelled = await waitFor(() => {
      const found = events().filter((e) => e.event === 'cancelled');
      return found.length === 2 ? found : undefined;
    }, 'both attempts to be cancelled at the server');
    expect(cancelled.map((e) => [metaOf(e).stepId, metaOf(e).attempt])).toEqual(steps.map((x) => [x.id, x.attempt]));
    expect(events().some((e) => e.event === 'done')).toBe(false);
  });

  it('passes workflowId, stepId, attempt and user in _meta', async () => {
    const { t, kb, web } = await setup();
    const flow = { start: 'a', steps: { a: { tool: 'kb.meta', next: 'b' }, b: { tool: 'web.meta' } } };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const [a, b] = await getSteps(t, id);
    const expected = (step: typeof a) => ({
      workflowId: id,
      stepId: step!.id,
      stepName: step!.name,
      attempt: 1,
      user: 'alice',
      idempotencyKey: `${id}:${step!.name}:${step!.id}`,
    });
    expect(metaOf(callsOf(kb.events(), 'meta')[0]!)).toMatchObject(expected(a));
    expect(metaOf(callsOf(web.stats.events, 'meta')[0]!)).toMatchObject(expected(b));
    expect(a!.result).toMatchObject({ meta: expected(a) });
  });

  it('denies a user without permission before the call reaches the server, and allows another', async () => {
    const { t, kb, web } = await setup({ permissions: { default: ['core.*'], users: { alice: ['kb.*', 'web.*'] } } });
    const flow = { start: 'a', steps: { a: { tool: 'kb.echo', args: { n: 1 }, retry: fastRetry(3), next: 'b' }, b: { tool: 'web.echo', args: { n: 2 }, retry: fastRetry(3) } } };
    const denied = await insertWorkflow(t, flow, {}, { user: 'mallory' });
    const nobody = await insertWorkflow(t, flow, {});
    const allowed = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const d = await waitForWorkflow(t, denied);
    expect(d.status).toBe('failed');
    expect(d.error).toMatchObject({ code: 'permission_denied', retryable: false });
    expect(d.error?.message).toContain('mallory');
    expect((await getSteps(t, denied)).map((s) => [s.name, s.status, s.attempt])).toEqual([['a', 'failed', 1]]);
    expect((await waitForWorkflow(t, nobody)).error).toMatchObject({ code: 'permission_denied', message: expect.stringContaining('without created_by') });
    const a = await waitForWorkflow(t, allowed);
    expect(a.status).toBe('completed');
    expect(a.output).toEqual({ n: 2 });
    const calls = [...callsOf(kb.events()), ...callsOf(web.stats.events)];
    expect(calls.map((e) => metaOf(e).user)).toEqual(['alice', 'alice']);
    expect(calls.every((e) => metaOf(e).workflowId === allowed)).toBe(true);
  });

  it('runs a step that hits a dropped HTTP session on a new session at its first attempt', async () => {
    const { t, web } = await setup();
    const flow = { start: 'e', steps: { e: { tool: 'web.echo', args: { n: '{{input.n}}' }, retry: fastRetry(3) } } };
    expect((await waitForWorkflow(t, await insertWorkflow(t, flow, { n: 1 }, { user: 'alice' }))).status).toBe('completed');
    await web.dropSessions(); // as a restarted server would: the old session id now gets 404
    const id = await insertWorkflow(t, flow, { n: 2 }, { user: 'alice' });
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', output: { n: 2 } });
    const steps = await getSteps(t, id);
    expect(steps.map((x) => [x.status, x.attempt, x.error?.code ?? null])).toEqual([['done', 1, null]]);
    expect(web.stats.sessionsOpened).toBe(2);
  });

  it('fails a step naming an unknown tool or server without retrying, naming what exists', async () => {
    const { t } = await setup();
    const tool = await insertWorkflow(t, { start: 'x', steps: { x: { tool: 'web.nope', retry: fastRetry(3) } } }, {}, { user: 'alice' });
    const server = await insertWorkflow(t, { start: 'x', steps: { x: { tool: 'nosuch.echo', retry: fastRetry(3) } } }, {}, { user: 'alice' });
    const a = await waitForWorkflow(t, tool);
    expect(a.error).toMatchObject({ code: 'unknown_tool', retryable: false });
    expect(a.error?.message).toContain('web.echo');
    const b = await waitForWorkflow(t, server);
    expect(b.error).toMatchObject({ code: 'unknown_tool', retryable: false });
    expect(b.error?.message).toContain('core, kb, web');
    expect([...(await getSteps(t, tool)), ...(await getSteps(t, server))].map((x) => x.attempt)).toEqual([1, 1]);
  });
});

describe('stepd start as a child process', () => {
  it('runs a workflow inserted by SQL on both configured servers for an allowed user, and denies another without calling', async () => {
    const t = await createTestSchema();
    const web = await startHttpMcpServer();
    onCleanup(() => web.close());
    const kb = stdioServerFixture();
    const dir = tempDirSync('stepd-daemon-');
    const config = {
      mcpServers: { kb: kb.config, web: { url: web.url, headers: { Authorization: 'Bearer ${WEB_TOKEN}' } } },
      permissions: { default: ['core.*'], users: { alice: ['kb.*', 'web.*'] } },
    };
    writeFileSync(join(dir, 'stepd.config.json'), JSON.stringify(config, null, 2));
    const daemon = spawnStepd(
      ['start', '--database-url', TEST_DATABASE_URL, '--schema', t.schema, '--config', join(dir, 'stepd.config.json'), '--poll-interval', '50ms'],
      { cwd: dir, env: { WEB_TOKEN: 's3cret' } },
    );
    onCleanup(async () => {
      await daemon.stop();
      await waitFor(() => kb.allExited(), 'the stdio server to exit with the daemon');
    });
    // The start-up report: each configured server and whether it answered.
    for (const server of ['kb', 'web']) await waitForLog(daemon, 'MCP server answered', (l) => l.server === server);
    expect(web.stats.lastHeaders.authorization).toBe('Bearer s3cret');

    const flow = {
      start: 'lookup',
      steps: {
        lookup: { tool: 'kb.echo', args: { topic: '{{input.topic}}' }, next: 'search' },
        search: { tool: 'web.text', args: { text: '{"hits": ["{{steps.lookup.result.topic}}"]}' }, next: 'report' },
        report: { tool: 'core.echo', args: { kb: '{{steps.lookup.result}}', web: '{{steps.search.result}}' }, done: true },
      },
    };
    const allowed = await insertWorkflow(t, flow, { topic: 'MCP' }, { user: 'alice' });
    const denied = await insertWorkflow(t, flow, { topic: 'MCP' }, { user: 'mallory' });
    const ok = await waitForWorkflow(t, allowed);
    expect(ok.status).toBe('completed');
    expect(ok.output).toEqual({ kb: { topic: 'MCP' }, web: { hits: ['MCP'] } });
    const no = await waitForWorkflow(t, denied);
    expect(no.status).toBe('failed');
    expect(no.error).toMatchObject({ code: 'permission_denied', retryable: false });
    expect((await getSteps(t, denied)).map((s) => [s.name, s.status, s.attempt, s.error?.code])).toEqual([['lookup', 'failed', 1, 'permission_denied']]);

    const calls = [...callsOf(kb.events()), ...callsOf(web.stats.events)];
    expect(calls.map((e) => [e.tool, metaOf(e).user, metaOf(e).workflowId])).toEqual([
      ['echo', 'alice', allowed],
      ['text', 'alice', allowed],
    ]);
    // A graceful stop closes both connections: the stdio server exits, the HTTP session ends.
    expect(await daemon.stop()).toEqual({ code: 0, signal: null });
    await waitFor(() => kb.allExited() && web.stats.sessionsOpen === 0, 'the MCP connections to close');
  });

  it('reads ./stepd.config.json from its working folder, reports a server that does not answer, allows all without permissions (said once), applies limits', async () => {
    const t = await createTestSchema();
    const kb = stdioServerFixture();
    const dir = tempDirSync('stepd-daemon-');
    writeFileSync(join(dir, 'stepd.config.json'), JSON.stringify({ mcpServers: { kb: kb.config, down: { url: 'http://127.0.0.1:1/mcp' } }, limits: { concurrency: 3, tools: { 'kb.concurrency': 1 } } }));
    const daemon = spawnStepd(['start', '--database-url', TEST_DATABASE_URL, '--schema', t.schema, '--poll-interval', '50ms'], { cwd: dir });
    onCleanup(async () => {
      await daemon.stop();
      await waitFor(() => kb.allExited(), 'the stdio server to exit with the daemon');
    });
    await waitForLog(daemon, 'MCP server answered', (l) => l.server === 'kb');
    await waitForLog(daemon, 'MCP server did not answer; its steps will retry', (l) => l.server === 'down');
    const flow = {
      start: 'each',
      steps: { each: { forEach: { items: '{{input.items}}', step: 'call', concurrency: 4 }, join: 'end' }, call: { tool: 'kb.concurrency', args: { ms: 50 } }, end: { tool: 'core.noop' } },
    };
    const id = await insertWorkflow(t, flow, { items: [1, 2, 3, 4] }, { user: 'anyone' });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const calls = callsOf(kb.events(), 'concurrency');
    expect(calls.map((e) => [metaOf(e).user, e.current])).toEqual([
      ['anyone', 1],
      ['anyone', 1],
      ['anyone', 1],
      ['anyone', 1],
    ]);
    expect(await daemon.stop()).toEqual({ code: 0, signal: null });
    expect(daemon.logs().filter((l) => String(l.msg).startsWith('no permissions configured'))).toHaveLength(1);
    expect(daemon.logs().find((l) => l.msg === 'executor started')).toMatchObject({ schema: t.schema, concurrency: 3 });
    expect(daemon.logs().find((l) => l.msg === 'configuration loaded')).toMatchObject({ config: join(dir, 'stepd.config.json'), mcpServers: ['kb', 'down'] });
  });

  it('on SIGTERM past the grace period, cancels a running MCP call at the server, hands the step back and exits', async () => {
    const t = await createTestSchema();
    const kb = stdioServerFixture();
    const dir = tempDirSync('stepd-daemon-');
    writeFileSync(join(dir, 'stepd.config.json'), JSON.stringify({ mcpServers: { kb: kb.config } }));
    const args = ['start', '--database-url', TEST_DATABASE_URL, '--schema', t.schema, '--poll-interval', '50ms', '--shutdown-grace', '100ms'];
    const daemon = spawnStepd(args, { cwd: dir });
    onCleanup(async () => {
      await daemon.stop();
      await waitFor(() => kb.allExited(), 'the stdio server to exit with the daemon');
    });
    const id = await insertWorkflow(t, { start: 's', steps: { s: { tool: 'kb.sleep', args: { ms: 60_000 } } } }, {}, { user: 'alice' });
    await waitFor(() => callsOf(kb.events(), 'sleep').length === 1, 'the sleep call to reach the server');
    expect(await daemon.stop()).toEqual({ code: 0, signal: null });
    expect(kb.events().filter((e) => e.event === 'cancelled').map((e) => metaOf(e).workflowId)).toEqual([id]);
    await waitFor(() => kb.allExited(), 'the stdio server to exit');
    expect((await getSteps(t, id)).map((s) => [s.status, s.attempt])).toEqual([['ready', 1]]);
  });

  it('reports config errors with the path of the offending key and exits non-zero', async () => {
    const dir = tempDirSync('stepd-badconfig-');
    const bad = {
      mcpServers: { kb: { command: '' }, web: { url: 'ftp://example.org' } },
      permissions: { users: { alice: ['kb.*x'] } },
      limits: { tools: { 'llm.*': 0 }, concurency: 4 },
    };
    writeFileSync(join(dir, 'bad.json'), JSON.stringify(bad));
    const proc = spawnStepd(['start', '--database-url', TEST_DATABASE_URL, '--schema', 'never_created', '--config', 'bad.json'], { cwd: dir });
    const exit = await proc.exited;
    expect(exit.code).not.toBe(0);
    const stderr = proc.stderr();
    for (const path of ['mcpServers.kb.command', 'mcpServers.web.url', 'permissions.users.alice[0]', 'limits.tools["llm.*"]', 'limits.concurency']) {
      expect(stderr).toContain(path);
    }
    expect(stderr).toContain('bad.json');

    writeFileSync(join(dir, 'missing-env.json'), JSON.stringify({ mcpServers: { kb: { command: 'x', env: { TOKEN: '${STEPD_TEST_UNSET_VAR}' } } } }));
    const unset = spawnStepd(['start', '--database-url', TEST_DATABASE_URL, '--config', 'missing-env.json'], { cwd: dir });
    expect((await unset.exited).code).not.toBe(0);
    expect(unset.stderr()).toMatch(/mcpServers\.kb\.env\.TOKEN: environment variable STEPD_TEST_UNSET_VAR is not set/);
  });
});
