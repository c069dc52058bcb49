/**
 * This executor's liveness row: registered at start, a beat every `intervalMs`, deleted on a
 * clean shutdown. The leader rescues the steps of an executor whose beats stopped for its
 * `deadAfterMs` (watchdog.ts). A beat that finds the row gone means this executor was presumed
 * dead and its steps were taken: it registers again and tells the executor to check its steps
 * (their late outcomes are fenced off anyway).
 */
import os from 'node:os';
import type pg from 'pg';
import { beatExecutor, deregisterExecutor, registerExecutor } from '../../db/queries.js';
import type { Logger } from '../../logger.js';
import type { DatabaseOutage } from '../core/dbOutage.js';

export interface HeartbeatOptions {
  pool: pg.Pool;
  executorId: string;
  intervalMs: number;
  deadAfterMs: number;
  concurrency: number;
  log: Logger;
  outage: DatabaseOutage;
  /** The row was gone: this executor was presumed dead and its steps rescued. */
  onPresumedDead: () => void;
}

export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly opts: HeartbeatOptions) {}

  /** Registers this executor (fails if the database refuses) and starts beating. */
  async start(): Promise<void> {
    await this.register();
    this.schedule();
  }

  private register(): Promise<void> {
    const o = this.opts;
    return registerExecutor(o.pool, {
      id: o.executorId,
      host: os.hostname(),
      pid: process.pid,
      heartbeatIntervalMs: o.intervalMs,
      deadAfterMs: o.deadAfterMs,
      concurrency: o.concurrency,
    });
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.beating = this.beat().finally(() => {
        this.beating = undefined;
        this.schedule();
      });
    }, this.opts.intervalMs);
  }

  /** One beat; never throws (a lost connection is part of the outage, logged once). */
  async beat(): Promise<void> {
    const o = this.opts;
    try {
      if (!(await beatExecutor(o.pool, o.executorId))) {
        await this.register();
        o.log.warn({ executorId: o.executorId }, 'this executor was presumed dead (no beat within dead-after); its running steps were rescued');
        o.onPresumedDead();
      }
      o.outage.succeeded();
    } catch (err) {
      if (!o.outage.failed(err, 'heartbeat')) o.log.error({ err }, 'heartbeat failed');
    }
  }

  /**
   * Stops beating but keeps the row: a shutdown that left steps running under this executor
   * (the database was away). The row goes stale and the leader rescues them after dead-after.
   */
  async pause(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.beating;
  }

  /** Stops beating and deletes the row (a clean shutdown: the steps were handed back). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.beating;
    try {
      await deregisterExecutor(this.opts.pool, this.opts.executorId);
    } catch (err) {
      this.opts.log.warn({ err }, 'could not deregister this executor; the leader will forget it once it counts as dead');
    }
  }
}
