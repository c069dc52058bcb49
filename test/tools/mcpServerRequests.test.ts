/**
 * What stepd's MCP client sends with each call and how it answers the server's own requests:
 * every call asks for progress (a progressToken) and passes the reports to the step; sampling and
 * other requests stepd does not offer are answered with an error and one warn line.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createMcpProviders, McpServerProvider } from '../../src/tools/mcp/index.js';
import type { ToolProgress } from '../../src/tools/tool.js';
import { Secrets } from '../../src/secrets.js';
import { startHttpMcpServer, type HttpMcpServer } from '../mcp-servers/http-server.js';
import { stdioServerFixture } from '../mcp-servers/fixtures.js';
import { stepContext, waitFor } from './helpers.js';

const providers: McpServerProvider[] = [];
const servers: HttpMcpServer[] = [];
const fixtures: ReturnType<typeof stdioServerFixture>[] = [];

afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
  for (const f of fixtures.splice(0)) await waitFor(() => f.allExited(), 'the stdio test server to exit');
});

/** A provider for `kind` whose log lines the test reads. */
async function provider(kind: 'stdio' | 'http', secrets?: Secrets) {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  let config;
  if (kind === 'http') {
    const server = await startHttpMcpServer();
    servers.push(server);
    config = { url: server.url };
  } else {
    const fixture = stdioServerFixture();
    fixtures.push(fixture);
    config = fixture.config;
  }
  const [p] = createMcpProviders({ kb: config }, { log, idleMs: 60_000, ...(secrets ? { secrets } : {}) });
  if (!p) throw new Error('no provider');
  providers.push(p);
  return { p, lines };
}

describe.each(['stdio', 'http'] as const)('MCP client requests and answers (%s)', (kind) => {
  it('sends a progressToken with every call, also when the step takes no reports', async () => {
    const { p } = await provider(kind);
    const result = (await p.call('meta', {}, stepContext())) as { meta: Record<string, unknown> };
    expect(result.meta).toMatchObject({ progressToken: expect.anything(), stepName: 'step' });
  });

  it("passes the server's progress notifications to the step, the message redacted", async () => {
    const { p } = await provider(kind, new Secrets(['item 3']));
    const reports: ToolProgress[] = [];
    const result = await p.call('progress', { count: 5, ms: 200 }, stepContext({ onProgress: (r) => reports.push(r) }));
    expect(result).toMatchObject({ count: 5 });
    expect(reports).toHaveLength(5);
    expect(reports[0]).toEqual({ progress: 1, total: 5, message: 'item 1' });
    expect(reports[2]?.message).not.toContain('item 3');
    expect(reports[4]).toEqual({ progress: 5, total: 5, message: 'item 5' });
  });

  it('answers a sampling request with a method-not-found error and one warn line', async () => {
    const { p, lines } = await provider(kind);
    const result = (await p.call('sample', {}, stepContext())) as { error: { code: number; message: string } };
    expect(result.error.code).toBe(-32601);
    expect(result.error.message).toContain('stepd does not offer sampling/createMessage');
    const warns = lines.filter((l) => l.level === 40 && l.method === 'sampling/createMessage');
    expect(warns).toHaveLength(1);
  });
});
