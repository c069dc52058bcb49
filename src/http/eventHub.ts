/**
 * One LISTEN on `stepd_events` for the whole HTTP server, shared by every open page
 * (Server-Sent Events). When the connection comes back after a drop, subscribers get a `resync`
 * so pages read again what they may have missed. Events are hints that something changed (any
 * role may NOTIFY one): subscribers use them to read again, never as facts (eventsRoute.ts).
 */
import { EventStream } from '../db/eventStream.js';
import type { StepdEvent } from '../events.js';
import type { Logger } from '../logger.js';

export type HubMessage = { kind: 'event'; event: StepdEvent } | { kind: 'resync' };
export type HubListener = (message: HubMessage) => void;

export class EventHub {
  private readonly listeners = new Set<HubListener>();
  private readonly stream: EventStream;

  constructor(opts: { url: string; schema: string; log: Logger }) {
    this.stream = new EventStream({
      url: opts.url,
      schema: opts.schema,
      applicationName: `stepd-http-events:${process.pid}`,
      onEvent: (event) => this.publish({ kind: 'event', event }),
      onLost: (err) => opts.log.warn({ err }, 'dashboard event stream lost; reconnecting'),
      onReconnect: () => this.publish({ kind: 'resync' }),
      onGiveUp: (err) => opts.log.error({ err }, 'dashboard event stream gave up; pages will not update live'),
      giveUpAfterMs: Number.POSITIVE_INFINITY,
    });
  }

  start(): Promise<void> {
    return this.stream.start();
  }

  /** Returns the function that unsubscribes. */
  subscribe(listener: HubListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  publish(message: HubMessage): void {
    for (const l of [...this.listeners]) l(message);
  }

  async close(): Promise<void> {
    this.listeners.clear();
    await this.stream.close();
  }
}
