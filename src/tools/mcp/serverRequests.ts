/**
 * Requests an MCP server sends to stepd, answered at once with a defined answer: a step runs
 * unattended, so there is nobody to ask and no model to sample from.
 *
 * - `elicitation/create` (form mode, the capability stepd declares): declined, `{action: "decline"}`;
 *   the server goes on as it does when a user declines.
 * - `sampling/createMessage`, `roots/list` and anything else not handled by the SDK (ping is):
 *   a JSON-RPC error (-32601, method not found) saying stepd does not offer it.
 *
 * Each is logged as one warn line naming the server and the method, so an operator sees why a
 * tool took its fallback path.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema, ErrorCode, McpError, type ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { cutRemoteText, type Secrets } from '../../secrets.js';

/** What stepd tells servers it can do: form elicitation (always declined), nothing else. */
export const STEPD_CLIENT_CAPABILITIES: ClientCapabilities = { elicitation: { form: {} } };

/** Makes `client` answer the server's requests as described above. */
export function answerServerRequests(client: Client, log: Logger, secrets?: Secrets): void {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const message = typeof request.params.message === 'string' ? cutRemoteText(request.params.message, secrets, 200) : undefined;
    log.warn({ method: request.method, message }, 'mcp server asked for user input (elicitation); declined: steps run unattended');
    return { action: 'decline' };
  });
  client.fallbackRequestHandler = async (request) => {
    const method = String(request.method).slice(0, 100);
    log.warn({ method }, `mcp server sent a request stepd does not offer (${method}); answered with an error`);
    throw new McpError(ErrorCode.MethodNotFound, `stepd does not offer ${method}: MCP steps run unattended, without sampling or user input`);
  };
}
