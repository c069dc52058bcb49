import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { Operations } from '../../src/api/operations.js';
import { bearerToken, createTokenLookup } from '../../src/api/tokens.js';
import { createKysely, createPool } from '../../src/db/connect.js';
import { createMcpHttpHandler } from '../../src/mcpServer/createMcpHttpHandler.js';
import { createPermissionPolicy } from '../../src/tools/permissions.js';
import { createTestSchema, onCleanup, startExecutor, waitFor, type TestSchema } from '../helpers/db.js';
import { CORE_ONLY_CONFIG, GATED_FLOW, approversRefuse, forbiddenToolRefused, gatedWorkflowApprovedAs, ok } from './scenario.js';

const TOKENS = { 'alice-token-0123456789': 'alice', 'bob-token-0123456789ab': 'bob' };

/** The handler behind a bearer-token check, on a server of its own (the daemon mounts it the same way at /mcp). */
async function serveHandler(t: TestSchema): Promise<string> {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 3 });
  const db = createKysely(pool);
  const operations = new Operations({ pool, db, schema: t.schema, permissions: createPermissionPolicy(CORE_ONLY_CONFIG.permissions) });
  const handler = createMcpHttpHandler({ operations });
  const tokens = createTokenLookup({ tokens: TOKENS });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve(
      {
        hostname: '127.0.0.1',
        port: 0,
        fetch: (request: Request) => {
          const user = tokens.userFor(bearerToken(request.headers.get('authorization')) ?? '');
          return user ? handler(request, user) : new Response('a token is required\n', { status: 401 });
        },
      },
      () => resolve(s),
    );
  });
  onCleanup(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      (server as unknown as { closeAllConnections(): void }).closeAllConnections();
    });
    await db.destroy();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'stepd-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  onCleanup(() => client.close());
  return client;
}

describe('MCP over Streamable HTTP (createMcpHttpHandler)', () => {
  it('acts as the user of the bearer token: a gated workflow is approved with readied_by = that user', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const url = await serveHandler(t);
    await gatedWorkflowApprovedAs(await connect(url, 'bob-token-0123456789ab'), t, 'bob');
  });

  it('refuses a flow calling a tool the token\'s user may not call', async () => {
    const t = await createTestSchema();
    const url = await serveHandler(t);
    await forbiddenToolRefused(await connect(url, 'alice-token-0123456789'), t, 'alice');
  });

  it('refuses an approval by a user the gate\'s approvers exclude', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await approversRefuse(await connect(await serveHandler(t), 'alice-token-0123456789'), 'alice');
  });

  it('offers running workflows as resources, those with a waiting gate described so', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const client = await connect(await serveHandler(t), 'alice-token-0123456789');
    const { workflowId } = await ok(client, 'start_workflow', { name: 'release', flow: GATED_FLOW, input: { version: '2' } });
    const uri = `stepd://workflows/${workflowId}`;
    const listed = await waitFor(async () => (await client.listResources()).resources.find((r) => r.uri === uri && r.description?.includes('waiting')), 'the workflow to wait at its gate');
    expect(listed).toMatchObject({ name: `workflow ${workflowId} (release)`, mimeType: 'application/json' });
    const read = await client.readResource({ uri });
    const details = JSON.parse((read.contents[0] as { text: string }).text);
    expect(details).toMatchObject({ workflow: { id: workflowId, status: 'running' }, waiting: [{ name: 'review', message: 'Ship the release?' }] });
    await expect(client.readResource({ uri: 'stepd://workflows/999999' })).rejects.toThrow(/workflow 999999 does not exist/);
  });

  it('answers GET and DELETE with 405: the endpoint is stateless', async () => {
    const t = await createTestSchema();
    const url = await serveHandler(t);
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(url, { method, headers: { Authorization: 'Bearer alice-token-0123456789', Accept: 'text/event-stream' } });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
    }
  });
});
