/**
 * The MCP tools over Streamable HTTP, as a web-standard handler the daemon's HTTP server mounts
 * at `/mcp` after it has mapped the request's bearer token to a user. Stateless: each POST gets
 * its own server and transport bound to that user and answers with JSON (no session to keep,
 * any daemon behind a load balancer can answer); GET (a server-to-client stream) and DELETE
 * (ending a session) have nothing to do and answer 405.
 */
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Operations } from '../api/operations.js';
import type { Logger } from '../logger.js';
import { createMcpServer } from './createMcpServer.js';

export interface McpHttpDeps {
  operations: Operations;
  log?: Logger;
  version?: string;
}

export type McpHttpHandler = (request: Request, user: string) => Promise<Response>;

export function createMcpHttpHandler(deps: McpHttpDeps): McpHttpHandler {
  return async (request, user) => {
    if (request.method !== 'POST') {
      return Response.json(
        { jsonrpc: '2.0', error: { code: -32000, message: `${request.method} is not supported: this MCP endpoint is stateless; POST JSON-RPC requests` }, id: null },
        { status: 405, headers: { Allow: 'POST' } },
      );
    }
    const server = createMcpServer(deps.operations, user, { ...(deps.log ? { log: deps.log } : {}), ...(deps.version ? { version: deps.version } : {}) });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    try {
      await server.connect(transport);
      return await transport.handleRequest(request);
    } finally {
      await server.close().catch((err: unknown) => deps.log?.warn({ err }, 'closing an MCP request failed'));
    }
  };
}
