/**
 * MCP tool listings (issue 20): a careless MCP server echoes the configured
 * `Authorization: Bearer ${SEARCH_TOKEN}` header into its tool listing — a tool's title and
 * description, an input property's description and default, the output schema. `list_tools` of
 * stepd's own MCP server (`stepd mcp`, a real child process connected to the database as a LOGIN
 * role granted only `<schema>_client`) shows all of it redacted to a user who may call that
 * server, and shows a user who may not call it none of its tools (that server is not even
 * contacted for them). `stepd tools` prints the listing redacted as well. A role with no grants
 * cannot serve `stepd mcp` at all.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { CLI, childEnv, runCli } from '../cli/helpers.js';
import { tempDirSync } from '../helpers/isolation.js';
import { startEchoHeadersServer, type EchoHeadersServer } from '../mcp-servers/echo-headers-server.js';
import { call } from '../mcpServer/scenario.js';
import { createLoginRole, onCleanup, securityEnv, type SecurityEnv } from './helpers.js';

interface Listed {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: { properties?: Record<string, { default?: unknown; description?: string }> };
  outputSchema?: { properties?: Record<string, { description?: string }> };
}

interface Setup {
  env: SecurityEnv;
  echo: EchoHeadersServer;
  token: string;
  /** A folder with the stepd.config.json: alice may call search.*, everyone core.*. */
  cwd: string;
  childEnv: Record<string, string>;
}

async function setup(): Promise<Setup> {
  const token = `tok-${randomBytes(12).toString('hex')}`;
  const echo = await startEchoHeadersServer({ describeHeaders: true });
  onCleanup(() => echo.close());
  const env = await securityEnv();
  const cwd = tempDirSync('stepd-mcp-listing-');
  const config = {
    mcpServers: { search: { url: echo.url, headers: { Authorization: 'Bearer ${SEARCH_TOKEN}' } } },
    permissions: { default: ['core.*'], users: { alice: ['search.*'] } },
  };
  writeFileSync(path.join(cwd, 'stepd.config.json'), JSON.stringify(config));
  return { env, echo, token, cwd, childEnv: { DATABASE_URL: env.client.url, STEPD_SCHEMA: env.t.schema, SEARCH_TOKEN: token } };
}

/** `stepd mcp --user USER` as a child process (connected as the client role), with the SDK's Client on its stdio. */
async function stepdMcpAs(s: Setup, user: string): Promise<Client> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--user', user], cwd: s.cwd, env: childEnv(s.childEnv) as Record<string, string>, stderr: 'pipe' });
  const client = new Client({ name: 'stepd-test', version: '1.0.0' });
  await client.connect(transport);
  onCleanup(() => client.close());
  return client;
}

/** The listing straight from the careless server, with the header stepd sends: it really carries the token. */
async function rawListing(s: Setup): Promise<string> {
  const client = new Client({ name: 'raw', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(s.echo.url), { requestInit: { headers: { Authorization: `Bearer ${s.token}` } } }));
  try {
    return JSON.stringify(await client.listTools());
  } finally {
    await client.close();
  }
}

async function listToolsAs(client: Client): Promise<{ whole: string; tools: Listed[]; failures: { server: string }[] }> {
  const result = await call(client, 'list_tools');
  expect(result.isError, result.content[0]?.text).toBeFalsy();
  const structured = result.structuredContent as { tools: Listed[]; failures: { server: string }[] };
  return { whole: JSON.stringify(result), ...structured };
}

describe('MCP tool listings', () => {
  it("list_tools shows a server's echoed token redacted in titles, descriptions and schemas, to a user who may call it", async () => {
    const s = await setup();
    const raw = await rawListing(s);
    expect(raw.split(s.token).length - 1).toBeGreaterThanOrEqual(5);

    const alice = await stepdMcpAs(s, 'alice');
    const { whole, tools } = await listToolsAs(alice);
    expect(whole).not.toContain(s.token);
    const byName = new Map(tools.map((t) => [t.name, t]));
    const described = byName.get('search.echo-description');
    expect(described?.title).toBe('Headers (Bearer [redacted])');
    expect(described?.description).toContain('"authorization":"Bearer [redacted]"');
    // Variant: the token in an input property's default and description, and in the output schema.
    const schema = byName.get('search.echo-schema');
    expect(schema?.inputSchema?.properties?.auth).toMatchObject({ default: 'Bearer [redacted]', description: 'the header to send, e.g. Bearer [redacted]' });
    expect(schema?.outputSchema?.properties?.sent?.description).toBe('what was sent: Bearer [redacted]');
    expect(s.echo.seen).toContain(`Bearer ${s.token}`);

    // The operator's `stepd tools` prints the same listing redacted.
    const printed = await runCli(['tools', '--json'], { cwd: s.cwd, env: { SEARCH_TOKEN: s.token } });
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).toContain('Bearer [redacted]');
    expect(printed.stdout + printed.stderr).not.toContain(s.token);
    await s.env.bystander.assertUndisturbedAndServed();
  });

  it("list_tools shows a user without permission on a server none of its tools, and never contacts that server for them", async () => {
    const s = await setup();
    const bob = await stepdMcpAs(s, 'bob');
    const before = s.echo.seen.length;
    const { whole, tools, failures } = await listToolsAs(bob);
    expect(tools.map((t) => t.name).filter((n) => !n.startsWith('core.'))).toEqual([]);
    expect(tools.length).toBeGreaterThan(0);
    expect(failures).toEqual([]);
    expect(whole).not.toContain('search');
    expect(whole).not.toContain(s.token);
    expect(s.echo.seen.length).toBe(before);
    // Alice, on the same config, sees them: the difference is the permission alone.
    const { tools: hers } = await listToolsAs(await stepdMcpAs(s, 'alice'));
    expect(hers.map((t) => t.name)).toEqual(expect.arrayContaining(['search.echo-description', 'search.echo-schema', 'core.echo']));
    expect(hers.every((t) => !t.name.startsWith('http.'))).toBe(true);
    await s.env.bystander.assertUndisturbedAndServed();
  });

  it('a database role with no grants cannot serve stepd mcp, so lists nothing, and the server is never contacted', async () => {
    const s = await setup();
    const bare = await createLoginRole(s.env.t, null, `bare_${randomBytes(5).toString('hex')}`);
    const before = s.echo.seen.length;
    const run = await runCli(['mcp', '--user', 'alice'], { cwd: s.cwd, env: { ...s.childEnv, DATABASE_URL: bare.url } });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/may not use schema .*: it needs the role .*_client|no stepd tables/);
    expect(run.stdout + run.stderr).not.toContain(s.token);
    expect(s.echo.seen.length).toBe(before);
    await s.env.bystander.assertUndisturbedAndServed();
  });
});
