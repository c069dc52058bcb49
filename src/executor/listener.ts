/**
 * The executor's dedicated connection: LISTENs for wake-ups (external inserts, readied
 * gates, cancellations) and holds the session advisory locks — this executor's identity and,
 * when it has it, watchdog leadership. Reconnects with backoff; the poll loop covers the gap.
 * Session locks die with the connection: after a reconnect the identity lock is taken again and
 * leadership is lost until the next sweep wins it back (possibly another executor does).
 */
import type pg from 'pg';
import { createClient, type PoolOptions } from '../db/connect.js';
import { tryAdvisoryLock } from '../db/queries.js';
import type { Logger } from '../logger.js';
import { backoffMs, type DatabaseOutage } from './dbOutage.js';

export const WAKEUP_CHANNEL = 'stepd_wakeup';

export interface WakeupPayload {
  schema: string;
  table: 'workflows' | 'workflow_steps';
  id: number | string;
  status: string;
}

export class ExecutorIdInUseError extends Error {
  readonly code = 'executor_id_in_use';
  constructor(readonly executorId: string) {
    super(`another executor with id "${executorId}" is running against this schema; give each executor its own --executor-id`);
    this.name = 'ExecutorIdInUseError';
  }
}

export class Listener {
  private client: pg.Client | undefined;
  private closed = false;
  private leader = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(
    private readonly opts: {
      pool: PoolOptions;
      schema: string;
      executorId: string;
      log: Logger;
      /** Where a lost connection is reported (logged once per outage). */
      outage?: DatabaseOutage;
      onWakeup: (p: WakeupPayload) => void;
      onReconnect: () => void;
    },
  ) {}

  get isLeader(): boolean {
    return this.leader;
  }

  /** Connects, LISTENs, and takes the executor-id lock (fails if another holds it). */
  async start(): Promise<void> {
    await this.connect(true);
  }

  private identityKey(): string {
    return `stepd.executor:${this.opts.schema}:${this.opts.executorId}`;
  }

  private async connect(first: boolean): Promise<void> {
    const client = createClient({ ...this.opts.pool, applicationName: `stepd-executor:${this.opts.executorId}` });
    client.on('notification', (msg) => {
      if (msg.channel !== WAKEUP_CHANNEL || !msg.payload) return;
      try {
        const payload = JSON.parse(msg.payload) as WakeupPayload;
        if (payload.schema === this.opts.schema) this.opts.onWakeup(payload);
      } catch {
        // Someone else's payload on our channel: ignore.
      }
    });
    client.on('error', (err) => this.onLost(client, err));
    client.on('end', () => this.onLost(client, new Error('listener connection ended')));
    await client.connect();
    try {
      if (!(await tryAdvisoryLock(client, this.identityKey()))) {
        if (first) throw new ExecutorIdInUseError(this.opts.executorId);
        this.opts.log.error({ executorId: this.opts.executorId }, 'executor id taken by another process while reconnecting');
      }
      await client.query(`LISTEN ${WAKEUP_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    this.client = client;
    this.leader = false;
    this.failures = 0;
  }

  private onLost(client: pg.Client, err: Error): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    const wasLeader = this.leader;
    this.leader = false;
    if (!this.opts.outage?.failed(err, 'listener')) this.opts.log.warn({ err }, 'listener connection lost; reconnecting');
    if (wasLeader) this.opts.log.info({}, 'watchdog leadership lost with the connection');
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const delay = backoffMs(++this.failures);
    this.reconnectTimer = setTimeout(async () => {
      this.reconnectTimer = undefined;
      try {
        await this.connect(false);
        if (this.closed) {
          await this.close();
          return;
        }
        this.opts.log.info({}, 'listener reconnected; listening again');
        this.opts.outage?.succeeded();
        this.opts.onReconnect();
      } catch (err) {
        if (!this.opts.outage?.failed(err, 'listener')) this.opts.log.warn({ err }, 'listener reconnect failed');
        this.scheduleReconnect();
      }
    }, delay);
  }

  /**
   * Tries to become (or confirms being) the watchdog leader. A leader checks that its session —
   * and with it the lock — is still there; a dead one is noticed here rather than by the next
   * notification that never comes.
   */
  async ensureLeader(): Promise<boolean> {
    const client = this.client;
    if (!client) return false;
    if (this.leader) {
      await client.query('SELECT 1');
      return this.client === client && this.leader;
    }
    const won = await tryAdvisoryLock(client, `stepd.watchdog:${this.opts.schema}`);
    if (this.client !== client) return false;
    if (won) this.opts.log.info({ executorId: this.opts.executorId }, 'this executor leads the watchdog');
    this.leader = won;
    return won;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    this.leader = false;
    await client?.end().catch(() => {});
  }
}
