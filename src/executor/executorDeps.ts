/**
 * What the executor is given (ExecutorDeps) and the dependency bundles it hands its units: the
 * transactions' (TxDeps), a claim's (ClaimDeps), running a step's (RunStepDeps), and the licence
 * a transaction gets to claim the steps it creates (createClaims). Assembly only, no behaviour.
 */
import type pg from 'pg';
import type { CapsConfig, ClientsConfig } from '../configFile.js';
import type { Logger } from '../logger.js';
import type { ExecutorMetrics } from '../telemetry/executorMetrics.js';
import type { StepTracing } from '../telemetry/stepTracing.js';
import type { LimitPolicy } from '../tools/limits.js';
import type { RatePolicy } from '../tools/rates.js';
import type { RetentionPolicy } from '../retention/retentionPolicy.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { ClaimDeps, FairClaimState } from './claims/claimSteps.js';
import type { ExecutorOptions } from './options.js';
import type { RunStepDeps, StepPolicy } from './steps/runStep.js';
import { checkCostBudget } from './steps/costBudget.js';
import type { LlmConfig } from '../tools/llm/llmConfig.js';
import { createClaims, type CreateClaims, type Slots } from './claims/slots.js';
import { stepProgressSink } from './steps/stepProgress.js';
import { runClaimedSubWorkflowStep } from './transitions/subWorkflows.js';
import type { TxDeps } from './outcomes/transactions.js';
import { WorkerHandOffs } from './steps/workerHandOffs.js';
import { runWorkerTaskStep } from './steps/workerTaskStep.js';
import type { WorkflowCache } from './core/workflowCache.js';

export interface ExecutorDeps {
  log: Logger;
  tools: ToolRegistry;
  permissions?: StepPolicy;
  /** Per-tool-pattern and per-user maximums of running steps. */
  limits?: LimitPolicy;
  /** Token buckets per tool pattern (config limits.rates). */
  rates?: RatePolicy;
  /** Which users each database role may start workflows as (config `clients`). */
  clients?: ClientsConfig;
  /** The operator's caps (config `caps`); defaults in src/flow/caps.ts. */
  caps?: CapsConfig;
  random?: () => number;
  /** Where claims, outcome transactions and steps are counted (default: nowhere). */
  metrics?: ExecutorMetrics;
  /** Spans of steps, tool calls and ended workflows (default: none). */
  tracing?: StepTracing;
  /** The config's `llm` section: its per-user cost budgets are checked before model calls (costBudget.ts). */
  llm?: LlmConfig;
  /** What the watchdog's leader deletes, and after how long (config `retention`). */
  retention?: RetentionPolicy;
}

/** The parts every bundle is made of. */
export interface ExecutorCore {
  opts: ExecutorOptions;
  deps: ExecutorDeps;
  pool: pg.Pool;
  cache: WorkflowCache;
  metrics: ExecutorMetrics;
  tracing: StepTracing;
}

export function txDepsOf(c: ExecutorCore): TxDeps {
  return {
    pool: c.pool,
    cache: c.cache,
    executorId: c.opts.executorId,
    schema: c.opts.schema,
    log: c.deps.log,
    random: c.deps.random ?? Math.random,
    emitEvents: c.opts.emitEvents,
    leaseGraceMs: c.opts.leaseGraceMs,
    clients: c.deps.clients,
    ...(c.deps.rates ? { rates: c.deps.rates } : {}),
    onWorkflowsEnded: c.tracing.enabled ? (ids) => c.tracing.workflowsEnded(c.pool, ids) : undefined,
  };
}

export function runStepDepsOf(c: ExecutorCore): RunStepDeps {
  const { pool, opts, deps } = c;
  const progressDeps = { pool, executorId: opts.executorId, schema: opts.schema, emitEvents: opts.emitEvents, log: deps.log };
  const subDeps = { pool, executorId: opts.executorId, schema: opts.schema, log: deps.log, caps: c.cache.compiler.caps };
  const workerDeps = { log: deps.log, handOffs: new WorkerHandOffs({ db: pool, executorId: opts.executorId, schema: opts.schema }), ...(deps.permissions ? { permissions: deps.permissions } : {}) };
  return {
    ...deps,
    progress: (row) => stepProgressSink(progressDeps, row),
    subWorkflow: (row, step) => runClaimedSubWorkflowStep(subDeps, row, step),
    costBudget: (row) => checkCostBudget({ pool, llm: deps.llm }, row),
    workerTask: (row, step, served) => runWorkerTaskStep(workerDeps, row, step, served),
  };
}

export function claimDepsOf(c: ExecutorCore, fairness: FairClaimState): ClaimDeps {
  return {
    pool: c.pool,
    cache: c.cache,
    executorId: c.opts.executorId,
    schema: c.opts.schema,
    leaseGraceMs: c.opts.leaseGraceMs,
    emitEvents: c.opts.emitEvents,
    log: c.deps.log,
    fairness,
    metrics: c.metrics,
    ...(c.deps.limits ? { limits: c.deps.limits } : {}),
  };
}

/**
 * Lets a transaction claim the steps it creates: up to the free slots (half of them while ready
 * steps wait, so they are not starved by the chains this executor already runs), instant tools
 * whatever the slots, and never a step a configured limit applies to — those are claimed by the
 * claim, which counts every executor's running steps.
 */
export function createClaimsOf(c: ExecutorCore, slots: Slots, maxSlots: number): CreateClaims {
  const limits = c.deps.limits;
  return createClaims(slots, {
    executorId: c.opts.executorId,
    maxSlots,
    limited: (tool, user) => limits !== undefined && !limits.unlimited && limits.applies(tool, user),
    instant: (tool) => c.deps.tools.isInstant(tool),
  });
}
