/**
 * A LISTEN on `stepd_events` for readers (`stepd watch`, `stepd run --follow`): one dedicated
 * client connection, events of one schema (and optionally one workflow) parsed with the shared
 * zod schema. When the connection drops it reconnects with backoff and calls `onReconnect`, so
 * the reader can re-read what it may have missed; after `giveUpAfterMs` of failed attempts it
 * calls `onGiveUp`.
 *
 * An event is a hint, never a fact: any role that can connect may NOTIFY a well-formed event on
 * `stepd_events` for any schema and workflow. Readers use one to know where to look and confirm
 * it from the rows before showing or acting on it (`watch` / `--follow`: src/cli/eventConfirmation.ts;
 * the dashboard reads its pages again; MCP clients read the resource again).
 */
import type pg from 'pg';
import { createClient } from './connect.js';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../events.js';

export interface EventStreamOptions {
  url: string;
  schema: string;
  /** Only this workflow's events; all of the schema's when unset. */
  workflowId?: string;
  applicationName?: string;
  onEvent: (event: StepdEvent) => void;
  /** The connection was lost: events may have been missed while it was down. */
  onLost?: (err: Error) => void;
  onReconnect?: () => void;
  onGiveUp?: (err: Error) => void;
  giveUpAfterMs?: number;
}

export class EventStream {
  private client: pg.Client | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private lostAt: number | undefined;
  private workflowId: string | undefined;

  constructor(private readonly opts: EventStreamOptions) {
    this.workflowId = opts.workflowId;
  }

  /** Narrows the stream to one workflow (`run --follow` listens before it knows the id). */
  only(workflowId: string): void {
    this.workflowId = workflowId;
  }

  /** Connects and LISTENs; rejects when the first connection fails. */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = createClient({
      url: this.opts.url,
      schema: this.opts.schema,
      role: 'client',
      applicationName: this.opts.applicationName ?? `stepd-events:${process.pid}`,
    });
    client.on('notification', (msg) => {
      if (msg.channel !== EVENTS_CHANNEL || !msg.payload) return;
      const event = parseEvent(msg.payload);
      if (!event || event.schema !== this.opts.schema) return;
      if (this.workflowId !== undefined && event.workflowId !== this.workflowId) return;
      this.opts.onEvent(event);
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.failures = 0;
    this.lostAt = undefined;
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.lostAt ??= Date.now();
    this.opts.onLost?.(err);
    this.scheduleReconnect(err);
  }

  private scheduleReconnect(lastError: Error): void {
    if (this.closed || this.timer) return;
    if (this.lostAt !== undefined && Date.now() - this.lostAt > (this.opts.giveUpAfterMs ?? 120_000)) {
      this.opts.onGiveUp?.(lastError);
      return;
    }
    const delay = Math.min(5_000, 100 * 2 ** this.failures++);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.connect().then(
        () => {
          if (!this.closed) this.opts.onReconnect?.();
        },
        (err: unknown) => this.scheduleReconnect(err instanceof Error ? err : new Error(String(err))),
      );
    }, delay);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
