/**
 * What wakes an idle worker early: a LISTEN on `stepd_tasks` (a task may be ready), and on
 * `stepd_wakeup` and `stepd_events` for hints that a workflow it runs a task of was cancelled or
 * ended (the task's lease is then checked at once: extend_task answers `cancelled`). Every
 * notification is a hint, never a fact (any role may send one).
 *
 * LISTEN needs a session. Behind PgBouncer in transaction mode the LISTEN statement succeeds but
 * nothing is ever delivered, so `listen: 'auto'` proves it works: it NOTIFYs a channel of its own
 * from another connection and waits for it to arrive. When it does not (or the connection is
 * lost), `listening` is false and the worker polls with back-off; a lost listener is reconnected.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { backoffMs } from '../executor/core/dbOutage.js';
import { parseWakeup, WAKEUP_CHANNEL } from '../executor/wakeups/wakeupHint.js';
import { EVENTS_CHANNEL, parseEvent } from '../events.js';
import type { Logger } from '../logger.js';

export const TASKS_CHANNEL = 'stepd_tasks';

/** Events after which a workflow's tasks are no longer wanted: their leases are checked at once. */
const ENDING_EVENTS = new Set(['workflow.cancelled', 'workflow.failed', 'workflow.completed', 'step.cancelled']);

export interface TaskWakeupsOptions {
  url: string;
  schema: string;
  /** true: LISTEN (and trust it); false: never (poll); 'auto': LISTEN when a probe proves it delivers. */
  mode: boolean | 'auto';
  log: Logger;
  /** Sends a NOTIFY on another connection (the worker's pool), for the probe. */
  notify: (channel: string, payload: string) => Promise<void>;
  onWake: () => void;
  /** A hint that this workflow may have been cancelled or ended. */
  onWorkflowHint: (workflowId: string) => void;
  /** How long the probe waits for its notification (default 2 s). */
  probeMs?: number;
}

export class TaskWakeups {
  readonly #opts: TaskWakeupsOptions;
  readonly #probeChannel = `stepd_worker_probe_${randomBytes(8).toString('hex')}`;
  #client: pg.Client | undefined;
  #listening = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #failures = 0;
  #probeArrived: (() => void) | undefined;

  constructor(opts: TaskWakeupsOptions) {
    this.#opts = opts;
  }

  /** Whether notifications are delivered now (else the worker polls). */
  get listening(): boolean {
    return this.#listening;
  }

  /** Connects once (when the mode asks for it); a failure leaves the worker polling and retries later. */
  async start(): Promise<void> {
    if (this.#opts.mode === false) return;
    await this.#connect().catch((err: unknown) => this.#lost(undefined, err));
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#listening = false;
    clearTimeout(this.#timer);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#opts.url, application_name: `stepd-worker-listen:${process.pid}`, keepAlive: true, connectionTimeoutMillis: 10_000 });
    client.on('notification', (msg) => this.#notified(msg.channel, msg.payload ?? ''));
    client.on('error', (err) => this.#lost(client, err));
    client.on('end', () => this.#lost(client, new Error('connection ended')));
    try {
      await client.connect();
      await client.query(`LISTEN ${TASKS_CHANNEL}; LISTEN ${WAKEUP_CHANNEL}; LISTEN ${EVENTS_CHANNEL}; LISTEN ${this.#probeChannel}`);
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw err;
    }
    if (this.#closed) return void (await client.end().catch(() => {}));
    this.#client = client;
    if (this.#opts.mode === 'auto' && !(await this.#probe())) {
      this.#client = undefined;
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      this.#opts.log.info({}, 'LISTEN delivers nothing on this connection (a transaction pooler?): polling with back-off');
      return;
    }
    this.#listening = true;
    this.#failures = 0;
    // Tasks may have become ready while nobody listened.
    this.#opts.onWake();
  }

  /** NOTIFYs the probe channel from another connection; true when it arrives here in time. */
  async #probe(): Promise<boolean> {
    const arrived = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.#opts.probeMs ?? 2_000);
      this.#probeArrived = () => (clearTimeout(timer), resolve(true));
    });
    try {
      await this.#opts.notify(this.#probeChannel, 'probe');
    } catch (err) {
      this.#opts.log.debug({ err }, 'the LISTEN probe could not be sent');
      this.#probeArrived?.();
      return false;
    }
    const ok = await arrived;
    this.#probeArrived = undefined;
    return ok;
  }

  #notified(channel: string, payload: string): void {
    if (channel === this.#probeChannel) return this.#probeArrived?.();
    if (channel === TASKS_CHANNEL) return this.#opts.onWake();
    if (channel === WAKEUP_CHANNEL) {
      const hint = parseWakeup(payload, this.#opts.schema);
      if (hint?.kind === 'cancelled') this.#opts.onWorkflowHint(hint.workflowId);
      return;
    }
    if (channel === EVENTS_CHANNEL) {
      const e = parseEvent(payload);
      if (e && e.schema === this.#opts.schema && ENDING_EVENTS.has(e.type)) this.#opts.onWorkflowHint(e.workflowId);
    }
  }

  #lost(client: pg.Client | undefined, err: unknown): void {
    if (this.#closed || (client !== undefined && this.#client !== client)) return;
    this.#client = undefined;
    if (this.#listening) this.#opts.log.warn({ err }, 'lost the LISTEN connection: polling until it is back');
    this.#listening = false;
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#closed) this.#connect().catch((e: unknown) => this.#lost(undefined, e));
    }, backoffMs(++this.#failures, 10_000));
    this.#timer.unref();
  }
}
