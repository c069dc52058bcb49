/**
 * The shapes every executor transaction shares — what a transaction is given (TxDeps, with the
 * AdvanceDeps a transition needs), an outcome to record (FinishInput, Outcome) and what a
 * transaction hands back (TxResult) — kept here, below the pipeline and the transitions, so that
 * admission, the outcome batch, the writer transaction and the transitions all read them without
 * importing each other. Types only.
 */
import type pg from 'pg';
import type { ClientsConfig } from '../../configFile.js';
import type { ErrorData } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { RatePolicy } from '../../tools/rates.js';
import type { StepUsage } from '../../usage/stepUsage.js';
import type { CreatedClaim } from './txWriter.js';
import type { WorkflowCache } from './workflowCache.js';

export interface AdvanceDeps {
  schema: string;
  log: Logger;
  random: () => number;
  emitEvents: boolean;
  /** Added to a step's timeout for the lease of a step claimed as it is created. */
  leaseGraceMs: number;
  /** The config's rate limits (limits.rates), written on the steps they apply to. */
  rates?: RatePolicy;
}

/** `usage`: what the attempt spent (src/usage/stepUsage.ts), recorded on its row. */
export type Outcome = ({ status: 'done'; result: unknown } | { status: 'failed'; error: ErrorData & { retryAfterMs?: number } }) & { usage?: StepUsage };

export interface TxDeps extends AdvanceDeps {
  pool: pg.Pool;
  cache: WorkflowCache;
  executorId: string;
  /** Which users each database role may start workflows as (config `clients`). */
  clients?: ClientsConfig | undefined;
  /** Told, after commit, of the workflows a transaction ended (completed or failed): their trace spans. */
  onWorkflowsEnded?: ((workflowIds: string[]) => void) | undefined;
}

export interface TxResult {
  /** Running steps this transaction cancelled; abort their tools. */
  cancelledRunning: string[];
  /** Steps whose outcome was recorded (the others were no longer ours: late results). */
  recorded: Set<string>;
  /** Whether this transaction created steps ready now for the claim loop (wake it). */
  createdWork: boolean;
  /** The soonest a step it created with a delay (retry backoff, timer) becomes ready. */
  readyInMs?: number;
  /** Steps created already claimed by this executor: start them now. */
  claimed: CreatedClaim[];
  /**
   * Outcomes this batch did not record, to be recorded each in a transaction of its own (they
   * come back with `alone: true`): their workflow was locked by another transaction, or settling
   * it took more than HEAVY_OUTCOME_STATEMENTS statements. So one heavy or blocked workflow never
   * holds the commit of the others.
   */
  deferred?: FinishInput[];
}

/**
 * How an outcome's step is fenced: `running` under this executor (a step it ran); `signalled`, a
 * readied signal wait recorded straight from `ready` (signalPickup.ts); the watchdog's
 * `lease-expired` and `gate-expired`.
 */
export type FinishGuard = 'running' | 'signalled' | 'lease-expired' | 'gate-expired';

export interface FinishInput {
  stepId: string;
  workflowId: string;
  guard: FinishGuard;
  outcome: Outcome;
  args?: unknown;
  /**
   * Record this outcome in a transaction of its own workflow: wait for the workflow's row lock
   * and settle whatever it takes. Without it, a batch skips workflows locked elsewhere and
   * outcomes whose settling is heavy, and hands them back in TxResult.deferred.
   */
  alone?: boolean;
  /** Its workflow's role and user: the outcome queue takes each batch round-robin across them (outcomeLanes.ts). */
  lane?: string;
  user?: string | null;
}
