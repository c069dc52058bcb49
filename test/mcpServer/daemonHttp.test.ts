import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { envFor, spawnCli } from '../cli/helpers.js';
import { createTestSchema, onCleanup, type TestSchema } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { CORE_ONLY_CONFIG, approversRefuse, forbiddenToolRefused, gatedWorkflowApprovedAs, ok, toolIssuesRefused } from './scenario.js';

const OPS_TOKEN = 'ops-token-4f9c2a7e81d3b605';
const CI_TOKEN = 'ci-token-0b1c2d3e4f5a6b7c';

/** `stepd start --http 0` with api.tokens from the environment; resolves with its /mcp URL. */
async function startDaemon(t: TestSchema): Promise<{ url: string; output: () => string }> {
  const cwd = tempDirSync('stepd-mcp-daemon-');
  writeFileSync(path.join(cwd, 'stepd.config.json'), JSON.stringify({ ...CORE_ONLY_CONFIG, api: { tokens: { '${OPS_TOKEN}': 'alice', '${CI_TOKEN}': 'ci-bot' } } }));
  const daemon = spawnCli(['start', '--http', '0', '--poll-interval', '100ms'], { cwd, env: { ...envFor(t), OPS_TOKEN, CI_TOKEN, STEPD_LOG_LEVEL: 'info' } });
  const [, url] = await daemon.waitFor(/MCP at (http:\/\/\S+\/mcp)/, 'stdout', 60_000);
  onCleanup(async () => {
    await daemon.kill('SIGTERM');
  });
  return { url: url!, output: () => daemon.stdout + daemon.stderr };
}

async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'stepd-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  onCleanup(() => client.close());
  return client;
}

describe('the daemon\'s /mcp (stepd start --http)', () => {
  it('acts as the user of the bearer token: lists the tools, approves a gate as that user, refuses forbidden tools and other approvers', async () => {
    const t = await createTestSchema();
    const { url, output } = await startDaemon(t);
    const alice = await connect(url, OPS_TOKEN);
    await gatedWorkflowApprovedAs(alice, t, 'alice');
    const ci = await connect(url, CI_TOKEN);
    await forbiddenToolRefused(ci, t, 'ci-bot');
    await toolIssuesRefused(alice, t);
    // list_tools shows only what the caller may call.
    const tools = (await ok(ci, 'list_tools')).tools as { name: string; allowed: boolean }[];
    expect(tools.find((x) => x.name === 'http.request')).toBeUndefined();
    expect(tools.find((x) => x.name === 'core.echo')?.allowed).toBe(true);
    await approversRefuse(alice, 'alice');
    // Tokens are secrets: never in the daemon's output.
    expect(output()).not.toContain(OPS_TOKEN);
  });

  it('refuses a request without a valid token (401)', async () => {
    const t = await createTestSchema();
    const { url } = await startDaemon(t);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    expect((await fetch(url, { method: 'POST', headers, body })).status).toBe(401);
    expect((await fetch(url, { method: 'POST', headers: { ...headers, Authorization: 'Bearer not-a-token-at-all-123' }, body })).status).toBe(401);
  });
});
