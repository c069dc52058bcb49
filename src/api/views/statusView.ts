/**
 * The status of a workflow: its row and its step rows as one JSON view (`stepd status --json`, the
 * dashboard, the MCP tools and the operations layer answer with it). Pure: rows in, a view out, so
 * it is tested without a database. The words and the tree are in statusText.ts.
 */
import type { StepUsage, UsageTotal } from '../../usage/stepUsage.js';
import { compileFlow } from '../../flow/validate.js';
import type { StepKind } from '../../flow/compiled.js';
import type { StepRow, StepStatus, WorkflowRow, WorkflowStatus } from '../../db/tables.js';
import { between } from './format.js';
import { sendSignalCommand, waitingSignalOf, type SignalWait } from './signalWait.js';

export interface StepView {
  id: string;
  name: string;
  kind: StepKind | 'unknown';
  tool: string | null;
  status: StepStatus;
  attempt: number;
  /** The most attempts the step's retry policy allows, when the flow says. */
  maxAttempts: number | null;
  fanoutId: string | null;
  itemIndex: number | null;
  args: unknown;
  result: unknown;
  error: unknown;
  createdAt: string;
  readyAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
  /** How long the attempt ran; for a gate or a timer, how long it waited (from its creation). */
  durationMs: number | null;
  expiresAt: string | null;
  readiedBy: string | null;
  readiedAt: string | null;
  /** What the tool reported last while the attempt ran ({progress, total?, message?}), if anything. */
  progress: StepRow['progress'];
  /** For a waiting gate: the command that approves it. */
  approve?: string;
  /** For a signal wait (any status): what it waits for (its row's args.signal). */
  signal?: SignalWait;
  /** A sub-workflow step: the child workflow this attempt started (null otherwise). */
  childId: string | null;
  /** What the attempt spent ({model?, inputTokens, outputTokens, cost}); null when nothing was reported. */
  usage: StepUsage | null;
  /** That child's own view, when it was loaded (subWorkflowTree.ts). */
  child?: StatusView;
}

export interface WorkflowView {
  id: string;
  name: string;
  status: WorkflowStatus;
  createdBy: string | null;
  key: string | null;
  input: unknown;
  output: unknown;
  error: unknown;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  cancelledAt: string | null;
  durationMs: number | null;
  stepCount: number;
  /** Tokens and cost of its steps and ended sub-workflows; null when nothing reported any. */
  usage: UsageTotal | null;
  /** A fork's source workflow (it may have been pruned since) and the step it ran from (null: its start); null when not a fork. */
  forkedFrom: { workflowId: string; fromStep: string | null } | null;
}

export interface StatusView {
  workflow: WorkflowView;
  steps: StepView[];
  /** Gates waiting for someone to approve or reject them. */
  waiting: {
    stepId: string;
    name: string;
    /** For a gate inside a sub-workflow (at any depth): that workflow's id and name. */
    workflowId?: string;
    workflowName?: string;
    since: string;
    expiresAt: string | null;
    approve: string;
    reject: string;
    /** The gate's approval.message as rendered when it started waiting (its row's args). */
    message?: string;
    /** Who may approve it (approval.approvers). */
    approvers?: string[];
    /** The last readying the executor refused (approval.schema / approvers): it waits again. */
    refused?: unknown;
    /** Set by `stepd status` (gateOffers.ts): whether the caller may approve it, and approval.schema. */
    mayApprove?: boolean;
    schema?: unknown;
  }[];
  /** Steps waiting for a signal (not gates: nobody approves them; sending the signal moves them on). */
  signals: WaitingSignal[];
}

export interface WaitingSignal extends SignalWait {
  stepId: string;
  name: string;
  /** For a wait inside a sub-workflow (at any depth): that workflow's id. */
  workflowId?: string;
  expiresAt: string | null;
  /** The command that sends a signal it accepts (add --payload JSON). */
  send: string;
}

const iso = (d: Date | string | null | undefined): string | null => (d ? new Date(d).toISOString() : null);

export function buildStatusView(wf: WorkflowRow, rows: StepRow[], now: Date = new Date()): StatusView {
  const compiled = compileFlow(wf.flow);
  const stepInfo = (name: string) => (compiled.ok ? compiled.flow.steps.get(name) : undefined);
  const end = wf.completed_at ?? wf.cancelled_at ?? (wf.status === 'running' ? now : null);
  const steps: StepView[] = rows.map((r) => {
    const info = stepInfo(r.name);
    const finished = r.status === 'done' || r.status === 'failed' || r.status === 'cancelled';
    // A gate or a timer is claimed only once it is readied or due, a sub-workflow step once its
    // child ended: its time is from its creation.
    const signal = waitingSignalOf(r);
    const waits = info?.kind === 'gate' || info?.kind === 'timer' || info?.kind === 'workflow' || signal !== undefined;
    const view: StepView = {
      id: String(r.id),
      name: r.name,
      kind: info?.kind ?? 'unknown',
      tool: r.tool,
      status: r.status,
      attempt: r.attempt,
      maxAttempts: info && (info.kind === 'tool' || info.kind === 'workflow') ? info.retry.maxAttempts : null,
      fanoutId: r.fanout_id === null ? null : String(r.fanout_id),
      itemIndex: r.item_index,
      args: r.args,
      result: r.result,
      error: r.error,
      createdAt: iso(r.created_at)!,
      readyAt: iso(r.ready_at),
      startedAt: iso(r.started_at),
      completedAt: iso(r.completed_at),
      durationMs: between(waits ? r.created_at : r.started_at, finished ? r.completed_at : r.status === 'running' ? now : null) ?? null,
      expiresAt: iso(r.expires_at),
      readiedBy: r.readied_by,
      readiedAt: iso(r.readied_at),
      progress: r.progress ?? null,
      childId: r.child_id ?? null,
      usage: r.usage ?? null,
    };
    if (signal) view.signal = signal;
    // A step waiting for its sub-workflow or for a signal is no gate: nothing offers to approve it.
    if (isGate(view)) view.approve = `stepd approve ${r.id}`;
    return view;
  });
  return {
    workflow: {
      id: String(wf.id),
      name: wf.name,
      status: wf.status,
      createdBy: wf.created_by,
      key: wf.key,
      input: wf.input,
      output: wf.output,
      error: wf.error,
      createdAt: iso(wf.created_at)!,
      startedAt: iso(wf.started_at),
      completedAt: iso(wf.completed_at),
      cancelledAt: iso(wf.cancelled_at),
      durationMs: between(wf.started_at, end) ?? null,
      stepCount: wf.step_count,
      usage: wf.usage ?? null,
      forkedFrom: wf.forked_from === null || wf.forked_from === undefined ? null : { workflowId: String(wf.forked_from), fromStep: wf.fork_step ?? null },
    },
    steps,
    waiting: steps
      .filter(isGate)
      .map((s) => ({
        stepId: s.id,
        name: s.name,
        since: s.createdAt,
        expiresAt: s.expiresAt,
        approve: `stepd approve ${s.id}`,
        reject: `stepd approve ${s.id} --reject --reason "…"`,
        ...gateArgsView(s.args),
        ...(s.error ? { refused: s.error } : {}),
      })),
    signals: steps.flatMap((s) =>
      s.status === 'pending' && s.signal ? [{ stepId: s.id, name: s.name, ...s.signal, expiresAt: s.expiresAt, send: sendSignalCommand(s.signal) }] : [],
    ),
  };
}

/** A step waiting for someone to approve or reject it: pending, and waiting neither for a sub-workflow, a signal nor a worker (a tool step, sql/0027). */
export function isGate(s: Pick<StepView, 'status' | 'childId' | 'signal'> & { tool?: string | null }): boolean {
  return s.status === 'pending' && s.childId === null && s.signal === undefined && (s.tool ?? null) === null;
}

/** message and approvers from a waiting gate's args (src/flow/gateArgs.ts). */
function gateArgsView(args: unknown): { message?: string; approvers?: string[] } {
  const a = (typeof args === 'object' && args !== null ? args : {}) as { message?: unknown; approvers?: unknown };
  return {
    ...(typeof a.message === 'string' ? { message: a.message } : {}),
    ...(Array.isArray(a.approvers) ? { approvers: a.approvers.filter((x): x is string => typeof x === 'string') } : {}),
  };
}
