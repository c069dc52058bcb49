/**
 * The daemon's Prometheus metrics: a prom-client Registry per daemon (never the global default
 * one), the ExecutorMetrics the executor reports to, and the /metrics handler, which reads the
 * workflow and ready-queue gauges from the database at scrape time (DatabaseGauges: one
 * connection of its own, time-boxed). Every metric is listed in docs/operations.md.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricsHandler } from '../http/app.js';
import { WORKFLOW_STATUSES } from '../db/queries/metrics.js';
import type { ExecutorMetrics, StepResultLabel } from './executorMetrics.js';
import { DatabaseGauges, type DatabaseGaugesOptions } from './databaseGauges.js';
import { ToolLabels } from './toolLabels.js';
import { UsageMetrics } from './usageMetrics.js';
import type { StepUsage } from '../usage/stepUsage.js';
import { CapacityMetrics } from './capacityMetrics.js';
import { WorkflowDurations } from './workflowDurations.js';
import { NotifyMetrics } from './notifyMetrics.js';
import { withoutMisnamedGauges } from './misnamedGauges.js';

/** Seconds: 5 ms … 10 min, for step durations (tools range from instant to long HTTP or MCP calls). */
const STEP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Seconds: 0.5 ms … 5 s, for claim and outcome transactions. */
const TX_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export interface PromMetricsOptions {
  /** Where the scrape reads the workflow and queue gauges; without it they are not exported. */
  database?: DatabaseGaugesOptions;
  /** Distinct tool names with a label of their own; later ones count as `other` (default 200). */
  maxTools?: number;
  /** Node's process metrics (process_*, nodejs_*: memory, CPU, event loop lag); default true. */
  processMetrics?: boolean;
}

export class PromMetrics implements ExecutorMetrics {
  readonly registry = new Registry();
  private readonly tools: ToolLabels;
  private readonly database: DatabaseGauges | undefined;
  private readonly stepsFinished: Counter<'tool' | 'outcome'>;
  private readonly stepDuration: Histogram<'tool'>;
  private readonly stepsInFlight: Gauge;
  private readonly retries: Counter<'tool'>;
  private readonly claimSeconds: Histogram;
  private readonly claimedSteps: Counter;
  private readonly outcomeTxSeconds: Histogram;
  private readonly outcomesRecordedTotal: Counter;
  private readonly rescues: Counter<'reason'>;
  private readonly workflows: Gauge<'status'>;
  private readonly readySteps: Gauge;
  private readonly oldestReady: Gauge;
  private readonly databaseUp: Gauge;
  private readonly spent: UsageMetrics;
  private readonly capacity: CapacityMetrics;
  private readonly gatesWaiting: Gauge;
  private readonly oldestGate: Gauge;
  private readonly durations: WorkflowDurations | undefined;
  /** Webhook deliveries (the notifier reports to it). */
  readonly notifications: NotifyMetrics;

  constructor(opts: PromMetricsOptions = {}) {
    const registers = [this.registry];
    this.tools = new ToolLabels(opts.maxTools);
    this.durations = opts.database ? new WorkflowDurations({ ...opts.database, registry: this.registry }) : undefined;
    const durations = this.durations;
    this.database = opts.database ? new DatabaseGauges({ ...opts.database, ...(durations ? { alsoRead: (db) => durations.collect(db) } : {}) }) : undefined;
    this.stepsFinished = new Counter({ name: 'stepd_steps_finished_total', help: 'Step attempts this executor finished, by tool and outcome (done, failed, timeout, cancelled).', labelNames: ['tool', 'outcome'], registers });
    this.stepDuration = new Histogram({ name: 'stepd_step_duration_seconds', help: 'How long step attempts ran on this executor (claim to outcome), by tool.', labelNames: ['tool'], buckets: STEP_BUCKETS, registers });
    this.stepsInFlight = new Gauge({ name: 'stepd_steps_in_flight', help: 'Steps this executor is running now.', registers });
    this.retries = new Counter({ name: 'stepd_step_retries_total', help: 'Attempts after the first (retries of failed or lost attempts) this executor started, by tool.', labelNames: ['tool'], registers });
    this.claimSeconds = new Histogram({ name: 'stepd_claim_duration_seconds', help: 'How long claiming ready steps took (one claim statement or transaction).', buckets: TX_BUCKETS, registers });
    this.claimedSteps = new Counter({ name: 'stepd_steps_claimed_total', help: 'Ready steps this executor claimed.', registers });
    this.outcomeTxSeconds = new Histogram({ name: 'stepd_outcome_transaction_duration_seconds', help: 'How long recording a batch of step outcomes (and advancing their workflows) took, per transaction.', buckets: TX_BUCKETS, registers });
    this.outcomesRecordedTotal = new Counter({ name: 'stepd_outcomes_recorded_total', help: 'Step outcomes recorded by this executor.', registers });
    this.rescues = new Counter({ name: 'stepd_watchdog_rescues_total', help: 'Running steps the watchdog rescued (failed as lost, to be retried), by reason: executor_dead, lease_expired.', labelNames: ['reason'], registers });
    this.workflows = new Gauge({ name: 'stepd_workflows', help: 'Workflows by status, read from the database at scrape time (each count stops at its cap).', labelNames: ['status'], registers: this.database ? registers : [] });
    this.readySteps = new Gauge({ name: 'stepd_ready_steps', help: 'Steps ready to be claimed now, read from the database at scrape time (stops at its cap).', registers: this.database ? registers : [] });
    this.oldestReady = new Gauge({ name: 'stepd_oldest_ready_step_age_seconds', help: 'How long the oldest step ready now has waited to be claimed (0: none waits).', registers: this.database ? registers : [] });
    this.databaseUp = new Gauge({ name: 'stepd_metrics_database_up', help: '1 when this scrape read the database gauges in time, 0 when it did not (they then keep their last values).', registers: this.database ? registers : [] });
    this.spent = new UsageMetrics(registers);
    this.capacity = new CapacityMetrics(registers, this.database !== undefined);
    this.gatesWaiting = new Gauge({ name: 'stepd_gates_waiting', help: 'Gates waiting for an approval now, read from the database at scrape time (stops at its cap).', registers: this.database ? registers : [] });
    this.oldestGate = new Gauge({ name: 'stepd_oldest_gate_age_seconds', help: 'How long the oldest gate waiting now has waited for its approval (0: none waits).', registers: this.database ? registers : [] });
    this.notifications = new NotifyMetrics(registers);
    for (const reason of ['executor_dead', 'lease_expired']) this.rescues.inc({ reason }, 0);
    // Node's process metrics, less the gauges prom-client names *_total (promtool refuses them).
    if (opts.processMetrics !== false) {
      collectDefaultMetrics({ register: this.registry });
      withoutMisnamedGauges(this.registry);
    }
  }

  claimed(seconds: number, rows: number): void {
    this.claimSeconds.observe(seconds);
    if (rows > 0) this.claimedSteps.inc(rows);
  }

  outcomesRecorded(seconds: number, count: number): void {
    this.outcomeTxSeconds.observe(seconds);
    if (count > 0) this.outcomesRecordedTotal.inc(count);
  }

  stepStarted(tool: string | null, attempt: number): void {
    this.stepsInFlight.inc();
    if (attempt > 1) this.retries.inc({ tool: this.tools.label(tool) });
  }

  stepEnded(tool: string | null, seconds: number, result: StepResultLabel | undefined): void {
    this.stepsInFlight.dec();
    if (result === undefined) return;
    const label = this.tools.label(tool);
    this.stepsFinished.inc({ tool: label, outcome: result });
    if (tool !== null) this.stepDuration.observe({ tool: label }, seconds);
  }

  usage(user: string | null, usage: StepUsage): void {
    this.spent.add(user, usage);
  }

  rescued(reason: 'executor_dead' | 'lease_expired', count: number): void {
    if (count > 0) this.rescues.inc({ reason }, count);
  }

  capacityWaits(keyBlocked: number, throttled: number): void {
    this.capacity.waited(keyBlocked, throttled);
  }

  /** Reads the database gauges (time-boxed) and renders every metric in the Prometheus text format. */
  async render(): Promise<string> {
    if (this.database) {
      const gauges = await this.database.read();
      this.databaseUp.set(gauges ? 1 : 0);
      if (gauges) {
        for (const status of WORKFLOW_STATUSES) this.workflows.set({ status }, gauges.workflows[status]);
        this.readySteps.set(gauges.readySteps);
        this.oldestReady.set(gauges.oldestReadySeconds);
        if (gauges.capacity) this.capacity.set(gauges.capacity);
        this.gatesWaiting.set(gauges.gatesWaiting);
        this.oldestGate.set(gauges.oldestGateSeconds);
      }
    }
    return this.registry.metrics();
  }

  /** The /metrics handler for the daemon's HTTP app. */
  handler(): MetricsHandler {
    return async () => new Response(await this.render(), { headers: { 'content-type': this.registry.contentType } });
  }

  /** Starts listening for workflow ends (the duration histogram); without it the histogram stays empty. */
  async start(): Promise<void> {
    await this.durations?.start();
  }

  async close(): Promise<void> {
    await this.durations?.close();
    await this.database?.close();
  }
}
