/**
 * A real MCP server over stdio for tests: `node test/mcp-servers/stdio-server.ts`.
 * With STEPD_TEST_LOG set, it appends one JSON line per event to that file:
 * `{"event":"start","pid":…}` at start-up, then calls, cancellations and crashes.
 */
import { appendFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { registerTestTools, type TestEvent } from './tools.ts';

const logFile = process.env.STEPD_TEST_LOG;

function record(event: TestEvent): void {
  if (logFile) appendFileSync(logFile, `${JSON.stringify({ ...event, pid: process.pid })}\n`);
}

const server = new McpServer({ name: 'stepd-test-stdio', version: '1.0.0' });
const state = { record, current: 0, max: 0 };
registerTestTools(server, state, {
  crash: () => {
    record({ event: 'crash' });
    process.exit(3);
  },
});

record({ event: 'start', env: { STEPD_TEST_MARK: process.env.STEPD_TEST_MARK ?? null }, cwd: process.cwd() });
await server.connect(new StdioServerTransport());
