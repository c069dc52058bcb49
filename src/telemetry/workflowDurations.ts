/**
 * `stepd_workflow_duration_seconds{flow, status}`: how long workflows took, start to end, by
 * workflow name and final status. The end events (workflow.completed|failed|cancelled on
 * stepd_events) say which workflows just ended; any role may NOTIFY, so an event is only a hint:
 * at scrape time the rows of the hinted workflows are read (one statement, on the gauges'
 * connection) and only rows that really ended, after this daemon started, are observed, each end
 * once. Ends missed while the event connection was down (or with `--no-events`) are not counted.
 */
import { Histogram, type Registry } from 'prom-client';
import { EventStream } from '../db/eventStream.js';
import { readFinishedWorkflowsByIds } from '../db/queries/metrics.js';
import type { Queryable } from '../db/queries/common.js';
import { TERMINAL_EVENTS } from '../events.js';
import type { Logger } from '../logger.js';
import { ToolLabels } from './toolLabels.js';

/** Seconds: 100 ms … a week. */
const WORKFLOW_BUCKETS = [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 86_400, 7 * 86_400];
/** Hinted workflows waiting for the next scrape; more are dropped (a flood of forged events). */
const MAX_PENDING = 50_000;
/** Ends already observed, remembered so a repeated (or forged) event is not counted twice. */
const MAX_REMEMBERED = 100_000;

export interface WorkflowDurationsOptions {
  databaseUrl: string;
  schema: string;
  log: Logger;
  registry: Registry;
  /** Distinct workflow names with a label of their own; later ones count as `other` (default 200). */
  maxFlows?: number;
}

export class WorkflowDurations {
  private readonly histogram: Histogram<'flow' | 'status'>;
  private readonly names: ToolLabels;
  private readonly pending = new Set<string>();
  private readonly observed = new Map<string, string>();
  private readonly since = new Date().toISOString();
  private readonly stream: EventStream;

  constructor(private readonly opts: WorkflowDurationsOptions) {
    this.names = new ToolLabels(opts.maxFlows);
    this.histogram = new Histogram({
      name: 'stepd_workflow_duration_seconds',
      help: 'How long workflows took from start to end, by workflow name (flow) and final status; workflows that ended while this daemon ran.',
      labelNames: ['flow', 'status'],
      buckets: WORKFLOW_BUCKETS,
      registers: [opts.registry],
    });
    this.stream = new EventStream({
      url: opts.databaseUrl,
      schema: opts.schema,
      applicationName: `stepd-metrics-events:${process.pid}`,
      onEvent: (e) => {
        if (TERMINAL_EVENTS.has(e.type) && this.pending.size < MAX_PENDING) this.pending.add(e.workflowId);
      },
      onLost: (err) => opts.log.debug({ err }, 'metrics: lost the event connection; reconnecting'),
    });
  }

  async start(): Promise<void> {
    await this.stream.start().catch((err: unknown) => this.opts.log.warn({ err }, 'metrics: cannot listen for workflow ends; stepd_workflow_duration_seconds stays empty'));
  }

  /** Confirms the hinted ends from the rows and observes them (called inside the scrape's read). */
  async collect(db: Queryable): Promise<void> {
    if (this.pending.size === 0) return;
    const ids = [...this.pending];
    this.pending.clear();
    for (const row of await readFinishedWorkflowsByIds(db, ids)) {
      if (row.ended_at < this.since || this.observed.get(row.id) === row.ended_at) continue;
      this.remember(row.id, row.ended_at);
      this.histogram.observe({ flow: this.names.label(row.name), status: row.status }, row.seconds);
    }
  }

  async close(): Promise<void> {
    await this.stream.close();
  }

  private remember(id: string, endedAt: string): void {
    this.observed.delete(id);
    this.observed.set(id, endedAt);
    if (this.observed.size > MAX_REMEMBERED) this.observed.delete(this.observed.keys().next().value!);
  }
}
