/**
 * `GET /events[?workflow=ID]`: the lifecycle events as Server-Sent Events (event name `stepd`;
 * `resync` after the server's LISTEN reconnected), with a comment line every 20 s so proxies keep
 * the connection open. An event is a hint (any role may NOTIFY on `stepd_events`), so each is
 * passed on only as what may have changed, `{type, workflowId, stepId?}`, never with the
 * payload's messages, errors or outputs: a page reads itself again to learn the facts. A client
 * more than 100 events behind gets one `resync` in place of its backlog.
 */
import type { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { HttpEnv } from './auth.js';
import type { StepdEvent } from '../events.js';
import type { EventHub, HubMessage } from './eventHub.js';

const KEEPALIVE_MS = 20_000;
const MAX_BACKLOG = 100;

export function mountEvents(app: Hono<HttpEnv>, hub: EventHub): void {
  app.get('/events', (c) => {
    const workflowId = c.req.query('workflow');
    return streamSSE(c, async (stream) => {
      const queue: HubMessage[] = [];
      let wake: (() => void) | undefined;
      const unsubscribe = hub.subscribe((m) => {
        if (m.kind === 'event' && workflowId && m.event.workflowId !== workflowId) return;
        // A client that cannot keep up gets one `resync` instead of an ever longer backlog.
        if (queue.length >= MAX_BACKLOG) queue.splice(0, queue.length, { kind: 'resync' });
        else queue.push(m);
        wake?.();
      });
      const keepalive = setInterval(() => wake?.(), KEEPALIVE_MS);
      stream.onAbort(() => wake?.());
      try {
        await stream.writeSSE({ event: 'ready', data: '{}', retry: 2_000 });
        while (!stream.aborted && !stream.closed) {
          if (queue.length === 0) {
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
            if (queue.length === 0 && !stream.aborted) await stream.write(': keepalive\n\n');
          }
          for (const m of queue.splice(0)) {
            await stream.writeSSE(m.kind === 'event' ? { event: 'stepd', data: JSON.stringify(changeHint(m.event)) } : { event: 'stepd', data: '{"type":"resync"}' });
          }
        }
      } finally {
        clearInterval(keepalive);
        unsubscribe();
      }
    });
  });
}

/** What an event says may have changed (where a page should look again), nothing it claims happened. */
export function changeHint(e: StepdEvent): { type: string; workflowId: string; stepId?: string } {
  return { type: e.type, workflowId: e.workflowId, ...(e.stepId !== undefined ? { stepId: e.stepId } : {}) };
}
