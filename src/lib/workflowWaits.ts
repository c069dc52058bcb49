/**
 * `waitForWorkflow`: waits until workflows end. A LISTEN on `stepd_events` (one connection,
 * opened on the first wait) says when to look; the workflow rows say whether they ended. An event
 * is only a hint (any role may NOTIFY one), so nothing is reported ended until its row says so;
 * a poll reads every waited-for row at an interval too, which covers a lost or missed event and a
 * listener that cannot connect (through a transaction pooler).
 */
import type { Kysely } from 'kysely';
import { EventStream } from '../db/eventStream.js';
import { getWorkflowsForEvents, type EventWorkflowRow } from '../db/reads.js';
import type { Database } from '../db/tables.js';
import { TERMINAL_EVENTS } from '../events.js';
import type { Logger } from '../logger.js';
import { workflowOutcomeOf, type WorkflowOutcome } from './workflowOutcome.js';

export interface WorkflowWaitsOptions {
  url: string;
  schema: string;
  db: Kysely<Database>;
  log: Logger;
  /** How often waited-for rows are read when no event arrives (default 1 s). */
  pollMs?: number;
}

export interface WaitOptions {
  /** Reject with a WaitTimeoutError after this long (default: wait as long as it takes). */
  timeoutMs?: number;
  /** Reject with the signal's reason when it aborts. */
  signal?: AbortSignal;
}

/** waitForWorkflow gave up before the workflow ended (its `timeoutMs`); the workflow goes on. */
export class WaitTimeoutError extends Error {
  readonly code = 'wait_timeout';
  constructor(
    readonly workflowId: string,
    timeoutMs: number,
  ) {
    super(`workflow ${workflowId} has not ended after ${timeoutMs} ms (it goes on; wait again or cancel it)`);
    this.name = 'WaitTimeoutError';
  }
}

interface Waiter {
  resolve(outcome: WorkflowOutcome): void;
  reject(err: unknown): void;
}

export class WorkflowWaits {
  readonly #opts: WorkflowWaitsOptions;
  readonly #waiters = new Map<string, Set<Waiter>>();
  #events: EventStream | undefined;
  #eventsStarting: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reading = false;
  #closed = false;

  constructor(opts: WorkflowWaitsOptions) {
    this.#opts = opts;
  }

  wait(workflowId: string, opts: WaitOptions = {}): Promise<WorkflowOutcome> {
    if (this.#closed) return Promise.reject(new Error('stepd is stopped: no more waits'));
    if (!/^[1-9][0-9]{0,18}$/.test(workflowId)) return Promise.reject(new TypeError(`not a workflow id: ${JSON.stringify(workflowId)}`));
    return new Promise<WorkflowOutcome>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        const set = this.#waiters.get(workflowId);
        set?.delete(waiter);
        if (set?.size === 0) this.#waiters.delete(workflowId);
      };
      const waiter: Waiter = {
        resolve: (o) => (done(), resolve(o)),
        reject: (e) => (done(), reject(e)),
      };
      const onAbort = () => waiter.reject(opts.signal?.reason ?? new Error('aborted'));
      if (opts.signal?.aborted) return reject(opts.signal.reason);
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.timeoutMs !== undefined) timer = setTimeout(() => waiter.reject(new WaitTimeoutError(workflowId, opts.timeoutMs!)), opts.timeoutMs);
      let set = this.#waiters.get(workflowId);
      if (!set) this.#waiters.set(workflowId, (set = new Set()));
      set.add(waiter);
      // Listening starts before the first read, so an end between the two is not missed.
      void this.#listen().then(() => this.#read([workflowId]));
      this.#schedulePoll();
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const set of this.#waiters.values()) for (const w of [...set]) w.reject(new Error('stepd stopped before the workflow ended'));
    await this.#eventsStarting?.catch(() => {});
    await this.#events?.close();
  }

  /** Opens the listener once; a listener that cannot connect leaves the poll to do the work. */
  #listen(): Promise<void> {
    this.#eventsStarting ??= (async () => {
      const events = new EventStream({
        url: this.#opts.url,
        schema: this.#opts.schema,
        applicationName: `stepd-wait:${process.pid}`,
        giveUpAfterMs: Number.POSITIVE_INFINITY,
        onEvent: (e) => {
          if (TERMINAL_EVENTS.has(e.type) && this.#waiters.has(e.workflowId)) void this.#read([e.workflowId]);
        },
        // Events may have been missed while the connection was down: read everything waited for.
        onReconnect: () => void this.#read([...this.#waiters.keys()]),
      });
      try {
        await events.start();
        if (this.#closed) await events.close();
        else this.#events = events;
      } catch (err) {
        this.#opts.log.warn({ err }, 'waitForWorkflow cannot LISTEN for events; polling the rows instead');
      }
    })();
    return this.#eventsStarting;
  }

  #schedulePoll(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#waiters.size === 0) return;
      void this.#read([...this.#waiters.keys()]).finally(() => this.#schedulePoll());
    }, this.#opts.pollMs ?? 1_000);
    this.#timer.unref();
  }

  async #read(ids: string[]): Promise<void> {
    if (ids.length === 0 || this.#closed) return;
    let rows: EventWorkflowRow[];
    try {
      rows = await getWorkflowsForEvents(this.#opts.db, ids);
    } catch (err) {
      // The poll tries again; a wait is never failed by a read that did not get through.
      if (!this.#reading) this.#opts.log.warn({ err }, 'waitForWorkflow could not read workflow rows; trying again');
      this.#reading = true;
      return;
    }
    this.#reading = false;
    const found = new Map(rows.map((r) => [String(r.id), r]));
    for (const id of ids) {
      const set = this.#waiters.get(id);
      if (!set) continue;
      const row = found.get(id);
      if (!row) {
        for (const w of [...set]) w.reject(new Error(`workflow ${id} does not exist in schema ${this.#opts.schema}`));
        continue;
      }
      const outcome = workflowOutcomeOf(row);
      if (outcome) for (const w of [...set]) w.resolve(outcome);
    }
  }
}
