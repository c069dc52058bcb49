/** Row types of the two tables, as the pg driver returns them (bigint ids as strings). */
import type { ErrorData } from '../errors.js';

export type WorkflowStatus = 'new' | 'running' | 'completed' | 'failed' | 'cancelled';
export type StepStatus = 'pending' | 'ready' | 'running' | 'done' | 'failed' | 'cancelled';

export const LIVE_STEP_STATUSES: readonly StepStatus[] = ['pending', 'ready', 'running'];

import type { StepUsage, UsageTotal } from '../usage/stepUsage.js';

export interface WorkflowRow {
  id: string;
  name: string;
  flow: unknown;
  input: Record<string, unknown>;
  status: WorkflowStatus;
  output: unknown;
  error: ErrorData | null;
  created_by: string | null;
  /** The database role that inserted (or last edited) the row while it was new: session_user, set by the guard. */
  created_role: string | null;
  /** Claims and admission take higher first (sql/0028). */
  priority?: number;
  key: string | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  cancelled_at: Date | null;
  deadline_at: Date | null;
  step_count: number;
  /** The registered flow version this workflow runs (null for an inline flow). */
  flow_version: number | null;
  /** Not admitted before this time (`stepd run --at`). */
  start_at: Date | null;
  /** A sub-workflow's parent workflow and the parent's step that waits for it. */
  parent_id: string | null;
  parent_step_id: string | null;
  /** The top-level workflow of a sub-workflow's tree (null on a top-level one; sql/0017). */
  root_id?: string | null;
  depth: number;
  /** Set by the guard when a client redrives a failed workflow; cleared by the executor. */
  redrive_requested_at: Date | null;
  redrives: number;
  /** Tokens and cost of its steps and ended sub-workflows (sql/0030); null when nothing reported any. */
  usage?: UsageTotal | null;
  /** A fork's source workflow (sql/0031; it may have been pruned since) and the step it runs from (null: the start). */
  forked_from?: string | null;
  fork_step?: string | null;
}

export interface StepRow {
  id: string;
  workflow_id: string;
  name: string;
  tool: string | null;
  args: unknown;
  result: unknown;
  error: ErrorData | null;
  status: StepStatus;
  attempt: number;
  ready_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
  lease_until: Date | null;
  executor_id: string | null;
  fanout_id: string | null;
  item_index: number | null;
  expires_at: Date | null;
  readied_by: string | null;
  readied_at: Date | null;
  /** The database role that readied the step: session_user, set by the guard. */
  readied_role: string | null;
  /** Executor bookkeeping: this row fanned out and its fan-out has not settled. */
  fanout_open: boolean;
  /** Executor bookkeeping: on a retry, the id of the step's first attempt. */
  first_attempt_id: string | null;
  /** What the tool reported last while this attempt ran (sql/0010): {progress, total?, message?}. */
  progress: { progress: number; total?: number; message?: string } | null;
  /** The sub-workflow this attempt started and waits for (sql/0011); executor-only. */
  child_id: string | null;
  /** What this attempt spent (sql/0030): {model?, inputTokens, outputTokens, cost}; executor-only. */
  usage?: StepUsage | null;
}

/** Kysely's view of the schema, for read-side queries (CLI, status). */
export interface Database {
  workflows: WorkflowRow;
  workflow_steps: StepRow;
}
