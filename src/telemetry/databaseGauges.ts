/**
 * The database side of a scrape: readQueueGaugesCapped on a pool of one connection of its own
 * (a scrape never takes a connection the executor needs), under a statement timeout, and
 * time-boxed: a scrape waits at most `timeoutMs`; a read still running then is not started
 * again until it ends (scrapes share it), so a slow database never piles up reads.
 */
import type pg from 'pg';
import { createPool } from '../db/connect.js';
import { readQueueGaugesCapped, type QueueGaugeCaps, type QueueGauges } from '../db/queries/metrics.js';
import type { Logger } from '../logger.js';
import { readCapacityGauges } from '../db/queries/capacity.js';

export interface DatabaseGaugesOptions {
  databaseUrl: string;
  schema: string;
  log: Logger;
  /** How long a scrape waits for the database (default 2 s; the statement timeout is the same). */
  timeoutMs?: number;
  caps?: QueueGaugeCaps;
  /** More reads in the same scrape transaction (the workflow durations' confirmations). */
  alsoRead?: (db: pg.PoolClient) => Promise<void>;
}

export const DEFAULT_GAUGE_CAPS: QueueGaugeCaps = { live: 100_000, finished: 10_000 };

export class DatabaseGauges {
  private readonly pool: pg.Pool;
  private readonly timeoutMs: number;
  private readonly caps: QueueGaugeCaps;
  private inFlight: Promise<QueueGauges> | undefined;

  constructor(private readonly opts: DatabaseGaugesOptions) {
    this.timeoutMs = opts.timeoutMs ?? 2_000;
    this.caps = opts.caps ?? DEFAULT_GAUGE_CAPS;
    this.pool = createPool({
      url: opts.databaseUrl,
      schema: opts.schema,
      role: 'client',
      max: 1,
      applicationName: 'stepd-metrics',
      onConnectionError: (err) => opts.log.debug({ err }, 'metrics database connection lost'),
    });
  }

  /** The gauges, or undefined when the database did not answer within the time box. */
  async read(): Promise<QueueGauges | undefined> {
    this.inFlight ??= this.query().finally(() => (this.inFlight = undefined));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.timeoutMs);
    });
    try {
      return await Promise.race([this.inFlight, timedOut]);
    } catch (err) {
      this.opts.log.warn({ err }, 'metrics: could not read the workflow and queue gauges');
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.inFlight?.catch(() => {});
    await this.pool.end();
  }

  private async query(): Promise<QueueGauges> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN READ ONLY');
      await client.query({ text: `SELECT set_config('statement_timeout', $1, true)`, values: [String(Math.max(1, Math.floor(this.timeoutMs)))] });
      const gauges = await readQueueGaugesCapped(client, this.caps);
      gauges.capacity = await readCapacityGauges(client, this.caps.live);
      await this.opts.alsoRead?.(client);
      await client.query('COMMIT');
      return gauges;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
}
