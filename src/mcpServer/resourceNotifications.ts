/**
 * Live MCP notifications for a long-lived (stdio) session, from the database's `stepd_events`:
 * a client that subscribed to `stepd://workflows/{id}` hears `notifications/resources/updated`
 * whenever that workflow or one of its steps moves (a gate starts waiting, a step finishes…),
 * and every client hears `notifications/resources/list_changed` when workflows start, wait or
 * end (coalesced to one a second). The stateless HTTP endpoint has no session to notify.
 * An event is a hint (any role may NOTIFY one): the client is only told to read the resource
 * again, which it reads from the rows; updates are coalesced per resource (at most one per
 * UPDATED_EVERY_MS), so a flood of forged events costs a handful of messages.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { EventStream } from '../db/eventStream.js';
import type { StepdEvent } from '../events.js';
import type { Logger } from '../logger.js';

export const WORKFLOW_URI_PREFIX = 'stepd://workflows/';
/** At most one list_changed per this many milliseconds. */
export const LIST_CHANGED_EVERY_MS = 1_000;
/** At most one resources/updated per subscribed resource per this many milliseconds. */
export const UPDATED_EVERY_MS = 100;

/** Events that change which workflows are running or which of them wait for someone. */
const LIST_EVENTS: ReadonlySet<string> = new Set(['workflow.started', 'workflow.completed', 'workflow.failed', 'workflow.cancelled', 'step.waiting']);

export interface ResourceNotifications {
  close(): Promise<void>;
}

/** Call before the server connects (it declares the `resources.subscribe` capability). */
export function prepareResourceSubscriptions(server: McpServer): Set<string> {
  const subscribed = new Set<string>();
  server.server.registerCapabilities({ resources: { subscribe: true, listChanged: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, (request) => {
    subscribed.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    subscribed.delete(request.params.uri);
    return {};
  });
  return subscribed;
}

/** Starts listening; without events (no LISTEN possible) the tools still work and one warning says so. */
export async function startResourceNotifications(
  server: McpServer,
  subscribed: ReadonlySet<string>,
  opts: { url: string; schema: string; log: Logger },
): Promise<ResourceNotifications> {
  let timer: NodeJS.Timeout | undefined;
  const listChanged = () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (server.isConnected()) server.sendResourceListChanged();
    }, LIST_CHANGED_EVERY_MS);
  };
  const updated = new Set<string>();
  let updateTimer: NodeJS.Timeout | undefined;
  const sendUpdates = () => {
    updateTimer = undefined;
    for (const uri of updated) {
      if (server.isConnected()) server.server.sendResourceUpdated({ uri }).catch((err: unknown) => opts.log.debug({ err }, 'could not send a resource update'));
    }
    updated.clear();
  };
  const onEvent = (event: StepdEvent) => {
    if (!server.isConnected()) return;
    const uri = `${WORKFLOW_URI_PREFIX}${event.workflowId}`;
    if (subscribed.has(uri)) {
      updated.add(uri);
      updateTimer ??= setTimeout(sendUpdates, UPDATED_EVERY_MS);
    }
    if (LIST_EVENTS.has(event.type)) listChanged();
  };
  const stream = new EventStream({
    url: opts.url,
    schema: opts.schema,
    applicationName: `stepd-mcp-events:${process.pid}`,
    onEvent,
    // Something may have moved while the connection was down: say the list may have changed.
    onReconnect: listChanged,
    onGiveUp: (err) => opts.log.warn({ err }, 'stopped listening for events: MCP resource notifications are off'),
  });
  try {
    await stream.start();
  } catch (err) {
    opts.log.warn({ err }, 'cannot listen for events: MCP resource notifications are off');
  }
  return {
    close: async () => {
      clearTimeout(timer);
      clearTimeout(updateTimer);
      await stream.close();
    },
  };
}
