import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { StdioServerConfig } from '../../src/configFile.js';
import { createMcpProviders, type McpServerProvider } from '../../src/tools/mcp/index.js';
import { buildToolbox, probeMcpServers, type Toolbox } from '../../src/tools/toolbox.js';
import { STDIO_SERVER_FILE } from '../mcp-servers/fixtures.js';
import { isAlive, rejectionOf, silentLogger, stepContext, waitFor } from './helpers.js';
import { tempDirSync } from '../helpers/isolation.js';

/** A stdio "server" that starts, writes its pid, and never answers initialize. */
function hungServer(): { config: StdioServerConfig; pid: () => number | undefined } {
  const pidFile = join(tempDirSync('stepd-hung-'), 'pid');
  const script = "require('node:fs').writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 1000)";
  const pid = () => {
    try {
      return Number(readFileSync(pidFile, 'utf8')) || undefined;
    } catch {
      return undefined;
    }
  };
  return { config: { command: process.execPath, args: ['-e', script, pidFile] }, pid };
}

const toolboxes: Toolbox[] = [];
const providers: McpServerProvider[] = [];
const pids: number[] = [];

afterEach(async () => {
  await Promise.all([...toolboxes.splice(0).map((t) => t.registry.close()), ...providers.splice(0).map((p) => p.close())]);
  for (const pid of pids.splice(0)) await waitFor(() => !isAlive(pid), `process ${pid} to exit`);
});

describe('the toolbox', () => {
  it('reports at start-up which servers answered, without waiting out one that hangs', { timeout: 20_000 }, async () => {
    const hung = hungServer();
    const toolbox = buildToolbox({ mcpServers: { kb: { command: process.execPath, args: [STDIO_SERVER_FILE] }, hung: hung.config } }, undefined, silentLogger());
    toolboxes.push(toolbox);
    // Open kb's connection first, so that how long a process takes to start here does not matter.
    await toolbox.mcp.find((p) => p.prefix === 'kb')!.list();
    const report = await probeMcpServers(toolbox, silentLogger(), { timeoutMs: 500 });
    expect(report).toEqual([
      { server: 'kb', ok: true, tools: 11 },
      { server: 'hung', ok: false, error: 'no answer within 500 ms (still connecting)' },
    ]);
    pids.push(await waitFor(hung.pid, 'the hung server to start'));
  });

  it('closes a server that is still connecting at once: the pending call fails, the process is stopped', { timeout: 20_000 }, async () => {
    const hung = hungServer();
    // Without close() cutting the connect short, this would wait an hour.
    const [provider] = createMcpProviders({ hung: hung.config }, { log: silentLogger(), connectTimeoutMs: 3_600_000 });
    providers.push(provider!);
    const call = provider!.call('anything', {}, stepContext());
    const pid = await waitFor(hung.pid, 'the hung server to start');
    pids.push(pid);
    await provider!.close();
    expect(await rejectionOf(call)).toMatchObject({ code: 'mcp_closed', retryable: true });
    await waitFor(() => !isAlive(pid), 'the hung server to be stopped');
  });
});
