/**
 * The executor's dedicated connection: LISTENs for wake-ups (external inserts, readied
 * gates, cancellations: hints to look, see wakeupHint.ts) and is the session its leases name (sql/0018, src/db/queries/leases.ts):
 * this executor's id, claimed with a random token of this process, and, when it has it, the
 * watchdog lease. Both are rows only executor roles may write, never advisory locks (a client
 * could take those first). Reconnects with backoff; the poll loop covers the gap. A claim lasts
 * while its session is alive: after a reconnect the id is claimed again on the new session (it
 * stays ours unless another process took it meanwhile), and leadership is renewed at the next
 * sweep, or taken by another executor once this session had ended or the lease ran out.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { createClient, type PoolOptions } from '../../db/connect.js';
import {
  claimExecutorIdUnlessHeldByLiveSession,
  releaseExecutorIdIfHeld,
  releaseWatchdogLeaseIfHeld,
  takeOrRenewWatchdogLeaseUnlessHeldByLiveLeader,
} from '../../db/queries.js';
import type { Logger } from '../../logger.js';
import { backoffMs, type DatabaseOutage } from '../core/dbOutage.js';
import { parseWakeup, WAKEUP_CHANNEL, type WakeupHint } from './wakeupHint.js';

export { WAKEUP_CHANNEL };

/** How long a stop waits to give its leases back before it just disconnects. */
const RELEASE_WAIT_MS = 2_000;

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
  /** This process's claim on the executor id: another process with the same id has another. */
  private readonly token = randomUUID();

  constructor(
    private readonly opts: {
      pool: PoolOptions;
      schema: string;
      executorId: string;
      /** How long a watchdog lease lasts unless renewed (a leader renews it at every sweep). */
      leaderLeaseMs: number;
      log: Logger;
      /** Where a lost connection is reported (logged once per outage). */
      outage?: DatabaseOutage;
      /** A hint of this schema (never a fact: any role may NOTIFY; see wakeupHint.ts). */
      onWakeup: (hint: WakeupHint) => void;
      onReconnect: () => void;
    },
  ) {}

  get isLeader(): boolean {
    return this.leader;
  }

  /** Connects, LISTENs, and claims the executor id (fails if a live process holds it). */
  async start(): Promise<void> {
    await this.connect(true);
  }

  private async connect(first: boolean): Promise<void> {
    const client = createClient({ ...this.opts.pool, applicationName: `stepd-executor:${this.opts.executorId}` });
    client.on('notification', (msg) => {
      if (msg.channel !== WAKEUP_CHANNEL || !msg.payload) return;
      // Another schema's, or nobody's: ignored.
      const hint = parseWakeup(msg.payload, this.opts.schema);
      if (hint) this.opts.onWakeup(hint);
    });
    client.on('error', (err) => this.onLost(client, err));
    client.on('end', () => this.onLost(client, new Error('listener connection ended')));
    await client.connect();
    try {
      if (!(await claimExecutorIdUnlessHeldByLiveSession(client, { executorId: this.opts.executorId, token: this.token }))) {
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
   * Takes or renews the watchdog lease: a leader renews it at every sweep, another executor
   * takes it once it ran out or the leader's session ended. A dead connection is noticed here
   * rather than by the next notification that never comes.
   */
  async ensureLeader(): Promise<boolean> {
    const client = this.client;
    if (!client) return false;
    const won = await takeOrRenewWatchdogLeaseUnlessHeldByLiveLeader(client, { executorId: this.opts.executorId, leaseMs: this.opts.leaderLeaseMs });
    if (this.client !== client) return false;
    if (won && !this.leader) this.opts.log.info({ executorId: this.opts.executorId }, 'this executor leads the watchdog');
    if (!won && this.leader) this.opts.log.warn({ executorId: this.opts.executorId }, 'watchdog lease taken by another executor (this one was too slow to renew it)');
    this.leader = won;
    return won;
  }

  /** Gives up the watchdog lease and the executor id (best effort: they go with the session anyway), then disconnects. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    const wasLeader = this.leader;
    this.leader = false;
    if (client) {
      const v = { executorId: this.opts.executorId, token: this.token };
      const release = async () => {
        if (wasLeader) await releaseWatchdogLeaseIfHeld(client, v.executorId);
        await releaseExecutorIdIfHeld(client, v);
      };
      // A connection that hangs (a partition) must not hold the stop up: the session ends anyway.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([release().catch(() => {}), new Promise((r) => (timer = setTimeout(r, RELEASE_WAIT_MS)))]);
      clearTimeout(timer);
    }
    await client?.end().catch(() => {});
  }
}
