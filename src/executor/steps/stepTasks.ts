/**
 * Starting claimed steps: each runs as its own task (RunningTasks) inside its metrics and trace
 * span, holding a tool slot unless it completes at once (gates, timers, instant tools); its
 * outcome goes to the OutcomeQueue. A prefetched step that waited long for its slot renews its
 * lease before its tool starts, and does not run if the step is no longer this executor's.
 */
import { renewLeaseIfRunning, type ClaimedStep } from '../../db/queries.js';
import { stepResultLabel } from '../../telemetry/executorMetrics.js';
import type { StepTrace } from '../../telemetry/stepTracing.js';
import type pg from 'pg';
import type { Logger } from '../../logger.js';
import type { ExecutorMetrics } from '../../telemetry/executorMetrics.js';
import type { StepTracing } from '../../telemetry/stepTracing.js';
import type { ToolRegistry } from '../../tools/registry.js';
import type { WorkflowCache } from '../core/workflowCache.js';
import type { Outcome } from '../transitions/advance.js';
import { refuseReadyingIfNotAllowed } from './gateReadying.js';
import { logStepEnded } from './stepReports.js';
import type { OutcomeQueue } from '../outcomes/outcomeQueue.js';
import { runClaimedStep, type RunStepDeps } from './runStep.js';
import type { RunningTask, RunningTasks } from '../claims/runningTasks.js';
import type { TxDeps } from '../outcomes/transactions.js';
import { claimedRow, type CreatedClaim } from '../core/txWriter.js';

/** What the step tasks read of the executor's core (its ExecutorCore, executorDeps.ts, is one). */
export interface StepTasksCore {
  opts: { executorId: string; leaseGraceMs: number };
  deps: { tools: Pick<ToolRegistry, 'isInstant'>; log: Logger };
  pool: pg.Pool;
  cache: WorkflowCache;
  metrics: ExecutorMetrics;
  tracing: StepTracing;
}

export interface StepTasksDeps {
  /** The pool, options (executor id, lease grace), tools, workflow cache, metrics and tracing. */
  core: StepTasksCore;
  tx: TxDeps;
  running: RunningTasks;
  outcomes: OutcomeQueue;
  runDeps: RunStepDeps;
}

export class StepTasks {
  constructor(private readonly deps: StepTasksDeps) {}

  /** Starts a step a claim returned (`ahead`: of a fair claim, served before the steps prefetched earlier). */
  start(row: ClaimedStep, ahead = false): void {
    // Gates, timers and instant tools (core.echo, core.noop) take no tool slot.
    const holdsSlot = row.tool !== null && !this.deps.core.deps.tools.isInstant(row.tool);
    const claimedAt = Date.now();
    this.deps.running.start(row.id, row.workflow_id, holdsSlot, (task) => this.measured(row, task, claimedAt), ahead);
  }

  /** Starts the steps a transaction created already claimed. */
  startClaimed(claimed: CreatedClaim[]): void {
    for (const c of claimed) this.start(claimedRow(c, this.deps.core.opts.executorId));
  }

  /** Runs the step's task inside its metrics and its trace span. */
  private async measured(row: ClaimedStep, task: RunningTask, claimedAt: number): Promise<void> {
    const { metrics, tracing } = this.deps.core;
    const started = performance.now();
    metrics.stepStarted(row.tool, row.attempt);
    const span = tracing.startStep({ workflowId: row.workflow_id, stepId: row.id, stepName: row.name, attempt: row.attempt, tool: row.tool });
    let outcome: Outcome | undefined;
    try {
      outcome = await this.run(row, task, span, claimedAt);
    } finally {
      metrics.stepEnded(row.tool, (performance.now() - started) / 1000, outcome && stepResultLabel(outcome));
      if (outcome?.usage) metrics.usage?.(row.created_by, outcome.usage);
      span.end(outcome);
    }
  }

  /** Runs a claimed step and queues its outcome; returns it (undefined: no outcome from here). */
  private async run(row: ClaimedStep, task: RunningTask, trace: StepTrace, claimedAt: number): Promise<Outcome | undefined> {
    const { cache, pool, opts } = this.deps.core;
    const log = this.deps.core.deps.log;
    const started = Date.now();
    // Cached from its admission or last transition (the usual case); else loaded.
    const wf = cache.get(row.workflow_id) ?? (await cache.load(pool, [row.workflow_id]).catch(() => new Map())).get(row.workflow_id);
    const step = wf?.flow.steps.get(row.name);
    if (started - claimedAt > opts.leaseGraceMs / 2) {
      // Prefetched and kept waiting for a slot: its lease ran meanwhile. Renewed, or no longer ours.
      const leaseMs = (step?.timeoutMs ?? 0) + opts.leaseGraceMs;
      if (!(await renewLeaseIfRunning(pool, { executorId: opts.executorId, id: row.id, leaseMs }))) return undefined;
    }
    // A readied gate whose approvers or schema refuse the readying waits again: no outcome.
    if (step?.kind === 'gate' && (await refuseReadyingIfNotAllowed(this.deps.tx, row, step))) return undefined;
    const runDeps = this.deps.core.tracing.enabled ? { ...this.deps.runDeps, trace } : this.deps.runDeps;
    const outcome = await runClaimedStep(runDeps, row, step, cache.compiler.caps, task.controller.signal);
    // No outcome: a sub-workflow step started its child and waits for it (pending, no task).
    if (task.released || outcome === undefined) return undefined;
    logStepEnded(log, { workflowId: row.workflow_id, stepId: row.id, step: row.name, attempt: row.attempt, ms: Date.now() - started }, outcome);
    // The slot is free once the tool is done: recording the outcome (batched with others) overlaps
    // with claiming and running the next steps. stop() waits for the queue to drain.
    this.deps.outcomes.add({ stepId: row.id, workflowId: row.workflow_id, guard: 'running', outcome, lane: wf?.role ?? '', user: row.created_by });
    return outcome;
  }
}
