/**
 * Secrets from `${VAR}` in the config never leave the process: the redactor itself, the config
 * expansion that collects them, the logger, the tool registry, and — end to end with a real
 * executor, PostgreSQL and a Streamable HTTP MCP server that echoes the Authorization header it
 * was sent in results, isError results and HTTP error bodies — no step row, workflow row, event
 * or log line holds the secret.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { StepError } from '../../src/errors.js';
import { EVENTS_CHANNEL } from '../../src/events.js';
import { DEFAULT_EXECUTOR_OPTIONS, Executor } from '../../src/executor/executor.js';
import { createLogger } from '../../src/logger.js';
import { cutRemoteText, MIN_SECRET_LENGTH, Secrets } from '../../src/secrets.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { buildToolbox } from '../../src/tools/toolbox.js';
import { createTestSchema, insertWorkflow, onCleanup, TEST_DATABASE_URL, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { startEchoHeadersServer } from '../mcp-servers/echo-headers-server.js';
import { rejectionOf, stepContext } from './helpers.js';
import { spawnStepd, waitForLog } from './stepdProcess.js';

function capture(): { lines: string[]; destination: { write(line: string): void } } {
  const lines: string[] = [];
  return { lines, destination: { write: (line: string) => void lines.push(line) } };
}

describe('Secrets', () => {
  it('replaces every occurrence, also JSON-escaped, and ignores values too short to be secrets', () => {
    const secrets = new Secrets(['hunter2-long', 'a"b\\c-quoted', 'ab']);
    expect(MIN_SECRET_LENGTH).toBe(4);
    expect(secrets.size).toBe(2);
    expect(secrets.redact('x hunter2-long y hunter2-long')).toBe('x [redacted] y [redacted]');
    expect(secrets.redact(JSON.stringify({ v: 'a"b\\c-quoted' }))).toBe('{"v":"[redacted]"}');
    expect(secrets.redact('ab stays')).toBe('ab stays');
  });

  it('redacts deep in values and keys, and returns the same value when nothing changes', () => {
    const secrets = new Secrets(['tok-123456']);
    const clean = { a: [1, { b: 'fine' }] };
    expect(secrets.redactValue(clean)).toBe(clean);
    expect(secrets.redactValue({ list: ['Bearer tok-123456'], 'tok-123456': { n: 1 } })).toEqual({ list: ['Bearer [redacted]'], '[redacted]': { n: 1 } });
  });

  it('cuts remote text to about 1 kB after redacting, so half a secret never survives the cut', () => {
    const secrets = new Secrets(['tok-123456']);
    const text = `${'x'.repeat(1020)}tok-123456${'y'.repeat(5000)}`;
    const cut = cutRemoteText(text, secrets);
    expect(cut.length).toBeLessThan(1100);
    expect(cut).not.toContain('tok-');
  });

  it('collects the values ${VAR} expanded to while reading the config', () => {
    const secrets = new Secrets();
    parseConfigFile(
      { mcpServers: { search: { url: 'http://127.0.0.1:1/mcp', headers: { Authorization: 'Bearer ${SEARCH_TOKEN}' } } }, http: { allow: ['http://${HOST}:*'] } },
      { SEARCH_TOKEN: 'tok-from-env', HOST: 'h' },
      'test',
      secrets,
    );
    expect(secrets.redact('Bearer tok-from-env')).toBe('Bearer [redacted]');
    expect(secrets.size).toBe(1);
  });
});

describe('redaction where data leaves', () => {
  it('the logger redacts messages, objects, child bindings and error stacks, also for secrets added later', () => {
    const { lines, destination } = capture();
    const secrets = new Secrets();
    const log = createLogger({ secrets, destination, level: 'debug' });
    secrets.add('tok-abcdef');
    log.child({ header: 'Bearer tok-abcdef' }).warn({ nested: { deep: ['tok-abcdef'] }, err: new Error('reply was tok-abcdef') }, 'saw tok-abcdef');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('tok-abcdef');
    const entry = JSON.parse(lines[0]!) as { msg: string; header: string; err: { message: string; stack: string } };
    expect([entry.msg, entry.header, entry.err.message]).toEqual(['saw [redacted]', 'Bearer [redacted]', 'reply was [redacted]']);
    expect(entry.err.stack).toContain('reply was [redacted]');
  });

  it('the logger keeps every line valid JSON when a secret looks like a number or a keyword', () => {
    const { lines, destination } = capture();
    const log = createLogger({ secrets: new Secrets(['5432', 'true']), destination });
    log.info({ port: 5432, ok: true, url: 'postgres://h:5432/db' }, 'listening');
    const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(entry).toMatchObject({ port: 5432, ok: true, url: 'postgres://h:[redacted]/db', msg: 'listening' });
  });

  it('the registry redacts results and errors of every tool, keeping code, retryable and retryAfterMs', async () => {
    const secrets = new Secrets(['tok-abcdef']);
    const leaky = {
      prefix: 'leaky',
      list: async () => [],
      call: async (tool: string) => {
        if (tool === 'ok') return { echoed: 'Bearer tok-abcdef' };
        throw Object.assign(new StepError('http_status', 'said tok-abcdef', { retryable: true, details: { body: 'tok-abcdef', retryAfterMs: 5 }, cause: new Error('tok-abcdef') }), { retryAfterMs: 5 });
      },
    };
    const registry = new ToolRegistry([leaky], { secrets });
    expect(await registry.call('leaky.ok', {}, stepContext())).toEqual({ echoed: 'Bearer [redacted]' });
    const err = await rejectionOf(registry.call('leaky.fail', {}, stepContext()));
    expect(err).toMatchObject({ code: 'http_status', retryable: true, message: 'said [redacted]', details: { body: '[redacted]' }, retryAfterMs: 5 });
    expect(err.cause).toBeUndefined();
    expect(String(err.stack)).not.toContain('tok-abcdef');
  });
});

async function listenAll(t: TestSchema): Promise<string[]> {
  const client = new pg.Client({ connectionString: t.url });
  await client.connect();
  onCleanup(() => client.end());
  const payloads: string[] = [];
  client.on('notification', (msg) => {
    if (msg.payload?.includes(t.schema)) payloads.push(msg.payload);
  });
  await client.query(`LISTEN ${EVENTS_CHANNEL}`);
  return payloads;
}

describe('a secret-echoing MCP server', () => {
  it('cannot get the configured token into step rows, workflow rows, events or logs', async () => {
    const token = `tok-${randomBytes(12).toString('hex')}`;
    const echo = await startEchoHeadersServer();
    const refusing = await startEchoHeadersServer({ failInitialize: true });
    onCleanup(() => echo.close());
    onCleanup(() => refusing.close());
    const secrets = new Secrets();
    const headers = { Authorization: 'Bearer ${SEARCH_TOKEN}' };
    const config = parseConfigFile(
      { mcpServers: { search: { url: echo.url, headers }, broken: { url: refusing.url, headers } } },
      { SEARCH_TOKEN: token },
      'test',
      secrets,
    );
    const { lines, destination } = capture();
    const log = createLogger({ secrets, destination, level: 'debug' });
    const toolbox = buildToolbox(config, undefined, log, { secrets });
    onCleanup(() => toolbox.registry.close());

    const t = await createTestSchema();
    const events = await listenAll(t);
    const executor = new Executor(
      { ...DEFAULT_EXECUTOR_OPTIONS, databaseUrl: t.url, schema: t.schema, executorId: `test-${randomBytes(4).toString('hex')}`, pollIntervalMs: 50, watchdogIntervalMs: 100, shutdownGraceMs: 2_000 },
      { log, tools: toolbox.registry },
    );
    await executor.start();
    onCleanup(() => executor.stop({ graceMs: 0 }));

    const fast = { maxAttempts: 2, initial: '10ms', max: '20ms', jitter: false };
    const one = (tool: string) => ({ start: 's', steps: { s: { tool, retry: fast, done: true } } });
    const echoed = await insertWorkflow(t, {
      start: 'ask',
      steps: { ask: { tool: 'search.headers', next: 'use' }, use: { tool: 'core.echo', args: { auth: '{{steps.ask.result.headers.authorization}}' }, done: true } },
    });
    const isError = await insertWorkflow(t, one('search.headers-error'));
    const httpError = await insertWorkflow(t, one('search.http-error'));
    const connectError = await insertWorkflow(t, one('broken.headers'));

    const done = await waitForWorkflow(t, echoed);
    expect(done).toMatchObject({ status: 'completed', output: { auth: 'Bearer [redacted]' } });
    expect(await waitForWorkflow(t, isError)).toMatchObject({ status: 'failed', error: { code: 'tool_error', retryable: false } });
    const failedHttp = await waitForWorkflow(t, httpError);
    expect(failedHttp).toMatchObject({ status: 'failed', error: { code: 'mcp_transport' } });
    expect(await waitForWorkflow(t, connectError)).toMatchObject({ status: 'failed', error: { code: 'mcp_unavailable' } });
    await waitFor(() => events.filter((e) => e.includes('"workflow.')).length >= 8, 'the workflow events');

    // The server really was sent the token and echoed it: the redaction is what kept it out.
    expect(echo.seen).toContain(`Bearer ${token}`);
    expect(refusing.seen).toContain(`Bearer ${token}`);
    expect(JSON.stringify(failedHttp.error)).toContain('[redacted]');
    expect((failedHttp.error as { message: string }).message.length).toBeLessThan(1300);

    const steps = await t.q<{ row: unknown }>('SELECT row_to_json(s) AS row FROM stepd.workflow_steps s');
    const workflows = await t.q<{ row: unknown }>('SELECT row_to_json(w) AS row FROM stepd.workflows w');
    expect(steps.length).toBeGreaterThanOrEqual(6);
    for (const [where, texts] of [
      ['step rows', steps.map((r) => JSON.stringify(r.row))],
      ['workflow rows', workflows.map((r) => JSON.stringify(r.row))],
      ['events', events],
      ['log lines', lines],
    ] as const) {
      expect(texts.filter((text) => text.includes(token)), where).toEqual([]);
    }
    // Remote bodies are cut before they are logged: no line carries the 4 kB padding.
    expect(lines.filter((line) => line.includes('x'.repeat(1500)))).toEqual([]);
    expect(lines.some((line) => line.includes('mcp connect failed'))).toBe(true);
  });

  it('cannot get it into the output of a running `stepd start` either', async () => {
    const token = `tok-${randomBytes(12).toString('hex')}`;
    const echo = await startEchoHeadersServer();
    const refusing = await startEchoHeadersServer({ failInitialize: true });
    onCleanup(() => echo.close());
    onCleanup(() => refusing.close());
    const t = await createTestSchema();
    const dir = mkdtempSync(join(tmpdir(), 'stepd-secrets-'));
    onCleanup(async () => rmSync(dir, { recursive: true, force: true }));
    const headers = { Authorization: 'Bearer ${SEARCH_TOKEN}' };
    writeFileSync(join(dir, 'stepd.config.json'), JSON.stringify({ mcpServers: { search: { url: echo.url, headers }, broken: { url: refusing.url, headers } } }));
    const daemon = spawnStepd(['start', '--database-url', TEST_DATABASE_URL, '--schema', t.schema, '--config', join(dir, 'stepd.config.json'), '--poll-interval', '50ms'], {
      cwd: dir,
      env: { SEARCH_TOKEN: token, STEPD_LOG_LEVEL: 'debug' },
    });
    onCleanup(async () => void (await daemon.stop()));
    // The start-up probe of the refusing server logs its failure (the reply echoed the token).
    await waitForLog(daemon, 'MCP server did not answer; its steps will retry', (l) => l.server === 'broken');
    const fast = { maxAttempts: 2, initial: '10ms', max: '20ms', jitter: false };
    const ids = await Promise.all(
      ['search.headers', 'search.headers-error', 'search.http-error', 'broken.headers'].map((tool) => insertWorkflow(t, { start: 's', steps: { s: { tool, retry: fast, done: true } } })),
    );
    const finished = await Promise.all(ids.map((id) => waitForWorkflow(t, id)));
    expect(finished.map((w) => w.status)).toEqual(['completed', 'failed', 'failed', 'failed']);
    await daemon.stop();
    expect(echo.seen).toContain(`Bearer ${token}`);
    expect(daemon.stderr()).toContain('[redacted]');
    expect(daemon.stderr().includes(token) || daemon.stdout().includes(token)).toBe(false);
  });
});
