/**
 * Cross-check of secret redaction from the client role's side (the full coverage is in
 * test/tools/secrets.test.ts): a service holding only `<schema>_client` starts a workflow that
 * calls an MCP server echoing the configured `Bearer ${SEARCH_TOKEN}` header, then reads
 * everything its role can read; the token is in no row it sees and in no log line.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { createLogger } from '../../src/logger.js';
import { Secrets } from '../../src/secrets.js';
import { startEchoHeadersServer } from '../mcp-servers/echo-headers-server.js';
import { clientInsert, onCleanup, securityEnv, waitForWorkflow } from './helpers.js';

describe('secrets as the client role sees them', () => {
  it("a workflow that makes an MCP server echo the configured token shows the client nothing of it", async () => {
    const token = `tok-${randomBytes(12).toString('hex')}`;
    const echo = await startEchoHeadersServer();
    onCleanup(() => echo.close());
    const secrets = new Secrets();
    const config = parseConfigFile({ mcpServers: { search: { url: echo.url, headers: { Authorization: 'Bearer ${SEARCH_TOKEN}' } } } }, { SEARCH_TOKEN: token }, 'test', secrets);
    const lines: string[] = [];
    const log = createLogger({ secrets, destination: { write: (line: string) => void lines.push(line) }, level: 'debug' });
    const env = await securityEnv({ config, log, secrets });

    const fast = { maxAttempts: 2, initial: '10ms', max: '20ms', jitter: false };
    const leak = await clientInsert(env.client, {
      start: 'ask',
      steps: { ask: { tool: 'search.headers', next: 'use' }, use: { tool: 'core.echo', args: { auth: '{{steps.ask.result.headers.authorization}}' }, done: true, output: '{{result}}' } },
    });
    const viaError = await clientInsert(env.client, { start: 's', steps: { s: { tool: 'search.http-error', retry: fast, done: true } } });
    expect(await waitForWorkflow(env.t, leak)).toMatchObject({ status: 'completed', output: { auth: 'Bearer [redacted]' } });
    expect((await waitForWorkflow(env.t, viaError)).status).toBe('failed');
    expect(echo.seen).toContain(`Bearer ${token}`);

    const visible = [
      ...(await env.client.q(`SELECT row_to_json(w)::text AS row FROM stepd.workflows w`)),
      ...(await env.client.q(`SELECT row_to_json(s)::text AS row FROM stepd.workflow_steps s`)),
    ].map((r) => r.row as string);
    expect(visible.length).toBeGreaterThanOrEqual(4);
    expect(visible.filter((row) => row.includes(token))).toEqual([]);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((line) => line.includes(token))).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});
