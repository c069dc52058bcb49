/**
 * Live progress for `stepd run --follow` and `stepd watch [ID]`: LISTEN on stepd_events, print
 * each event (step name, attempt, duration, the approve command of a waiting gate, what a signal
 * wait waits for and the command that sends it), and, when
 * following one workflow, end with its outcome as the exit code.
 *
 * Following never misses the end: it LISTENs before it reads the workflow row, reads the row
 * again after every reconnect of the event connection and every few seconds (a daemon started
 * with --no-events sends nothing), and finishes on whichever sees the end first.
 *
 * An event is a hint (any role may NOTIFY): nothing is printed, and nothing ends, before the rows
 * confirm it, and what is printed comes from the rows (eventConfirmation.ts). Events waiting for
 * confirmation are read in batches, two statements a batch, so a flood of forged events costs a
 * few reads, never one per event, and the real end is not held up behind it.
 */
import { EventStream } from '../db/eventStream.js';
import { getWorkflow, type EventWorkflowRow } from '../db/reads.js';
import type { WorkflowRow } from '../db/tables.js';
import { TERMINAL_EVENTS, type StepdEvent } from '../events.js';
import { CliError, EXIT, errorMessage, isConnectionError, note, out, outJson, type ClientContext } from './common.js';
import { confirmEvent, endEventOf, factKey, PrintedFacts, readEventRows, type EventRows } from './eventConfirmation.js';
import { between, compactJson, formatClock, formatDuration, formatError } from '../api/views/format.js';
import { formatProgress } from '../api/views/progressText.js';
import { sendSignalCommand, signalWaitText } from '../api/views/signalWait.js';
import { describeUsage } from '../usage/stepUsage.js';
import { ExecutorLivenessNotice } from './executorLivenessNotice.js';

const RECHECK_MS = 5_000;
/** Events confirmed together (one read of their workflow rows, one of their step rows). */
const CONFIRM_BATCH = 500;
/** Events kept waiting for confirmation (or, before following starts, for it); more are dropped. */
const MAX_QUEUED = 20_000;

export interface FollowOptions {
  json: boolean;
}

type Outcome = { code: number };

export class Follower {
  private readonly stream: EventStream;
  private workflowId: string | undefined;
  /** Until watchAll() or follow() is called, events are kept (run --follow LISTENs before it inserts). */
  private mode: 'buffering' | 'all' | 'one' = 'buffering';
  private readonly early: StepdEvent[] = [];
  /** Events waiting for their rows to confirm them (confirmQueued runs while there are some). */
  private readonly queued: StepdEvent[] = [];
  private confirming = false;
  private dropped = false;
  private readonly printed = new PrintedFacts();
  private chain: Promise<void> = Promise.resolve();
  private finished = false;
  private resolveOutcome: ((o: Outcome) => void) | undefined;
  private rejectOutcome: ((e: Error) => void) | undefined;
  private recheckTimer: NodeJS.Timeout | undefined;
  /** Says when no executor is alive (checked with each recheck of the row). */
  private readonly liveness: ExecutorLivenessNotice;

  constructor(
    private readonly ctx: ClientContext,
    private readonly opts: FollowOptions,
  ) {
    this.liveness = new ExecutorLivenessNotice(ctx.pool, ctx.schema, note);
    this.stream = new EventStream({
      url: ctx.url,
      schema: ctx.schema,
      applicationName: `stepd-follow:${process.pid}`,
      onEvent: (e) => this.onEvent(e),
      onLost: (err) => note(`stepd: lost the event connection (${errorMessage(err)}); reconnecting…`),
      onReconnect: () => {
        note('stepd: event connection restored');
        if (this.workflowId !== undefined) this.enqueue(() => this.checkRow());
      },
      onGiveUp: (err) => this.rejectOutcome?.(new CliError(`lost the database connection: ${errorMessage(err)}`, EXIT.unreachable)),
    });
  }

  /** Starts listening; call before creating the workflow so its first events are not missed. */
  async listen(): Promise<void> {
    await this.stream.start();
  }

  /** Streams every event of the schema until SIGINT (`stepd watch` without an id). */
  async watchAll(): Promise<number> {
    this.mode = 'all';
    for (const e of this.early.splice(0)) this.hint(e);
    this.enqueue(() => this.liveness.check('every workflow'));
    this.scheduleRecheck();
    let stopInterrupt = () => {};
    return new Promise<number>((resolve, reject) => {
      this.rejectOutcome = reject;
      stopInterrupt = onInterrupt(() => resolve(EXIT.ok));
    }).finally(async () => {
      stopInterrupt();
      await this.close();
    });
  }

  /** Follows one workflow to its end; resolves with the exit code of its outcome. */
  async follow(workflowId: string): Promise<number> {
    this.workflowId = workflowId;
    this.mode = 'one';
    this.stream.only(workflowId);
    const outcome = new Promise<Outcome>((resolve, reject) => {
      this.resolveOutcome = resolve;
      this.rejectOutcome = reject;
    });
    for (const e of this.early.splice(0)) if (e.workflowId === workflowId) this.hint(e);
    this.enqueue(() => this.checkRow());
    this.scheduleRecheck();
    const stopInterrupt = onInterrupt(() => {
      note(`stepd: stopped following workflow ${workflowId}; it keeps running (follow it again with: stepd watch ${workflowId})`);
      this.resolveOutcome?.({ code: 130 });
    });
    try {
      return (await outcome).code;
    } finally {
      stopInterrupt();
      await this.close();
    }
  }

  async close(): Promise<void> {
    this.finished = true;
    clearTimeout(this.recheckTimer);
    await this.stream.close();
  }

  private onEvent(e: StepdEvent): void {
    if (this.mode === 'buffering') {
      if (this.early.length < MAX_QUEUED) this.early.push(e);
      else this.dropOne();
      return;
    }
    this.hint(e);
  }

  /** Queues an event for confirmation; one confirmation pass at a time reads them in batches. */
  private hint(e: StepdEvent): void {
    if (this.queued.length >= MAX_QUEUED) return this.dropOne();
    this.queued.push(e);
    if (this.confirming) return;
    this.confirming = true;
    this.enqueue(() => this.confirmQueued().finally(() => (this.confirming = false)));
  }

  private dropOne(): void {
    if (!this.dropped) note('stepd: events arrive faster than they can be confirmed; some are not shown');
    this.dropped = true;
  }

  /** Events are printed one at a time, in the order they arrived. */
  private enqueue(task: () => Promise<void>): void {
    this.chain = this.chain.then(task).catch((err: unknown) => {
      if (this.workflowId !== undefined) this.rejectOutcome?.(err instanceof Error ? err : new Error(String(err)));
      else note(`stepd: ${errorMessage(err)}`);
    });
  }

  private scheduleRecheck(): void {
    this.recheckTimer = setTimeout(() => {
      if (this.finished) return;
      if (this.workflowId === undefined) this.enqueue(() => this.liveness.check('every workflow'));
      else this.enqueue(() => this.checkRow());
      this.scheduleRecheck();
    }, RECHECK_MS);
  }

  /** Confirms the queued events from their rows, a batch at a time, and prints (or ends on) what the rows state. */
  private async confirmQueued(): Promise<void> {
    while (!this.finished && this.queued.length > 0) {
      const batch = this.queued.splice(0, CONFIRM_BATCH);
      let rows: EventRows;
      try {
        rows = await readEventRows(this.ctx.db, batch);
      } catch (err) {
        // Unconfirmed, so not shown; an end is still found by the next read of the workflow row.
        if (!isConnectionError(err)) throw err;
        note(`stepd: cannot confirm events right now (${errorMessage(err)}); not showing them`);
        continue;
      }
      for (const e of batch) {
        const fact = confirmEvent(e, rows, this.ctx.schema);
        if (!fact || !this.printed.add(factKey(fact, rows))) continue;
        if (!TERMINAL_EVENTS.has(fact.type)) this.print(fact);
        else if (this.workflowId !== undefined) return this.finish(fact, rows.workflows.get(fact.workflowId));
        else this.print(fact, rows.workflows.get(fact.workflowId));
      }
    }
  }

  /** Reads the workflow row; if it has ended, finishes as if its last event had arrived. */
  private async checkRow(): Promise<void> {
    if (this.finished || this.workflowId === undefined) return;
    let row: WorkflowRow | undefined;
    try {
      row = await getWorkflow(this.ctx.db, this.workflowId);
    } catch (err) {
      // The next recheck or reconnect reads it again; the event stream gives up if the database stays away.
      if (isConnectionError(err)) return note(`stepd: cannot read workflow ${this.workflowId} right now (${errorMessage(err)}); retrying`);
      throw err;
    }
    if (!row) throw new CliError(`workflow ${this.workflowId} does not exist in schema "${this.ctx.schema}"`);
    const end = endEventOf(row, this.ctx.schema);
    if (end) return this.finish(end, row);
    await this.liveness.check(`workflow ${this.workflowId}`);
  }

  private finish(e: StepdEvent, row: EventWorkflowRow | undefined): void {
    if (this.finished) return;
    this.finished = true;
    this.print(e, row);
    const status = row?.status ?? e.type.slice('workflow.'.length);
    if (!this.opts.json && row) {
      if (row.status === 'completed') out(`output: ${compactJson(row.output, 2_000)}`);
      if (row.status === 'failed' && row.error) {
        out(`error: ${formatError(row.error)}`);
        const issues = (row.error as { issues?: unknown }).issues;
        if (Array.isArray(issues)) for (const i of issues as { path?: string; message?: string }[]) out(`  ${i.path || '(flow)'}: ${i.message}`);
      }
      if (row.usage) out(`usage: ${describeUsage(row.usage)}`);
    }
    this.resolveOutcome?.({ code: status === 'completed' ? EXIT.ok : status === 'cancelled' ? EXIT.cancelled : EXIT.failed });
  }

  private print(e: StepdEvent, row?: EventWorkflowRow): void {
    if (this.opts.json) {
      // The end event is the last line: it carries the workflow's final status, output and error.
      const extra =
        row && TERMINAL_EVENTS.has(e.type)
          ? { status: row.status, output: row.output ?? null, error: row.error ?? null, usage: row.usage ?? null, durationMs: between(row.started_at ?? row.created_at, row.completed_at ?? row.cancelled_at) }
          : {};
      outJson({ ...e, ...extra });
      return;
    }
    const prefix = `${formatClock(e.at)}  ${this.workflowId === undefined ? `wf ${e.workflowId}  ` : ''}`;
    out(prefix + describeEvent(e, row));
  }
}

/** One event in words. */
export function describeEvent(e: StepdEvent, row?: EventWorkflowRow): string {
  const step = `${e.step ?? '?'}${e.itemIndex !== undefined ? `[${e.itemIndex}]` : ''}${e.stepId ? ` #${e.stepId}` : ''}`;
  const took = e.durationMs !== undefined ? ` in ${formatDuration(e.durationMs)}` : '';
  const attempt = e.attempt !== undefined && e.attempt > 1 ? ` (attempt ${e.attempt})` : '';
  switch (e.type) {
    case 'workflow.started':
      // A redrive announces itself as a start carrying its number (docs/redrive.md).
      return typeof e.redrive === 'number' ? `workflow ${e.workflowId} redriven (redrive ${e.redrive})` : `workflow ${e.workflowId} started`;
    case 'workflow.completed':
    case 'workflow.failed':
    case 'workflow.cancelled': {
      const ms = row ? between(row.started_at ?? row.created_at, row.completed_at ?? row.cancelled_at) : undefined;
      const verb = e.type.slice('workflow.'.length);
      const err = e.type === 'workflow.failed' && e.error ? `: ${formatError(e.error)}` : '';
      return `workflow ${e.workflowId} ${verb}${ms !== undefined ? ` in ${formatDuration(ms)}` : ''}${err}`;
    }
    case 'step.started':
      return `${step} started${attempt}`;
    case 'step.done':
      return `${step} done${took}${attempt}`;
    case 'step.failed':
      return `${step} failed${took}${attempt}: ${formatError(e.error)}`;
    case 'step.retrying':
      return `${e.step ?? '?'}${e.itemIndex !== undefined ? `[${e.itemIndex}]` : ''} will retry: attempt ${e.attempt ?? '?'}${e.retryInMs !== undefined ? ` in ${formatDuration(e.retryInMs)}` : ''}`;
    case 'step.waiting': {
      // A signal wait is no gate: it goes on when the signal is sent, never by an approval.
      if (e.signal) {
        const wait = { names: e.signal.names, key: e.signal.key, since: e.signal.since ?? '' };
        return `${step} ${signalWaitText(wait, new Date(e.at))} → ${sendSignalCommand(wait)}`;
      }
      // A refused readying (approval.schema / approvers) comes back as step.waiting with its error.
      const refused = e.error ? `${step} ${formatError(e.error)}\n` : '';
      const message = typeof e.message === 'string' ? `: ${e.message}` : '';
      return e.stepId
        ? `${refused}${step} waiting for approval${message} → stepd approve ${e.stepId}   (reject: stepd approve ${e.stepId} --reject)`
        : `${refused}${step} waiting for approval${message} (see: stepd status ${e.workflowId})`;
    }
    case 'step.progress':
      return `${step} progress ${formatProgress(e.progress)}${attempt}`;
  }
}

/** Calls `fn` on the first SIGINT/SIGTERM; returns a function that removes the handlers. */
function onInterrupt(fn: () => void): () => void {
  const handler = () => fn();
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}
