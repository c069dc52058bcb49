/**
 * A real MCP server over stdio whose one tool, `kill_executor`, SIGKILLs the process that started
 * it (the stepd executor running the step): a step that kills whatever runs it.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const server = new McpServer({ name: 'stepd-test-executor-killer', version: '1.0.0' });
server.registerTool('kill_executor', { description: 'SIGKILLs the executor that called it' }, async () => {
  process.kill(process.ppid, 'SIGKILL');
  return { content: [{ type: 'text', text: 'unreachable' }] };
});
await server.connect(new StdioServerTransport());
