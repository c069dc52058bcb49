/**
 * `stepd status`: a workflow and its step rows as JSON and as a readable tree. Pure: rows in,
 * a view and lines out, so it is tested without a database.
 *
 * The tree follows the rows: top-level steps in creation order; the rows a fan-out created
 * (fanout_id = the fork's row) nested under that fork, by branch or item (item_index), each
 * branch's steps and retry attempts in order.
 */
import { describeUsage, type StepUsage, type UsageTotal } from '../../usage/stepUsage.js';
import { compileFlow } from '../../flow/validate.js';
import type { StepKind } from '../../flow/compiled.js';
import type { StepRow, StepStatus, WorkflowRow, WorkflowStatus } from '../../db/tables.js';
import { between, compactJson, formatClock, formatDuration, formatError } from './format.js';
import { formatProgress } from './progressText.js';
import { renderWaitingGates } from './gateOffers.js';
import { describeSignalWait, sendSignalCommand, waitingSignalOf, signalWaitText, type SignalWait } from './signalWait.js';

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
  /** That child's own view, when it was loaded (src/cli/subWorkflowTree.ts). */
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

export interface StepNode {
  step: StepView;
  /** Rows this step created as a fan-out, grouped by branch / item. */
  branches: { index: number | null; steps: StepNode[] }[];
}

/** The rows as a tree: fan-out children under their fork row, grouped by branch / item. */
export function buildTree(steps: StepView[]): StepNode[] {
  const byFanout = new Map<string, StepView[]>();
  for (const s of steps) {
    if (s.fanoutId === null) continue;
    const list = byFanout.get(s.fanoutId) ?? [];
    list.push(s);
    byFanout.set(s.fanoutId, list);
  }
  const known = new Set(steps.map((s) => s.id));
  const node = (step: StepView): StepNode => {
    const children = byFanout.get(step.id) ?? [];
    const groups = new Map<number | null, StepView[]>();
    for (const c of children) {
      const list = groups.get(c.itemIndex) ?? [];
      list.push(c);
      groups.set(c.itemIndex, list);
    }
    const branches = [...groups.entries()]
      .sort(([a], [b]) => (a ?? -1) - (b ?? -1))
      .map(([index, list]) => ({ index, steps: list.map(node) }));
    return { step, branches };
  };
  // Top level: rows outside any fan-out, and (defensively) rows whose fork row is missing.
  return steps.filter((s) => s.fanoutId === null || !known.has(s.fanoutId)).map(node);
}

/** What a step row is doing, in a few words. */
export function describeStep(s: StepView, now: Date = new Date()): string {
  const dur = s.durationMs === null || s.kind === 'fork' ? '' : ` ${formatDuration(s.durationMs)}`;
  // A failure that was not retryable ended the step at once: no "attempt 1/3" as if more were coming.
  const final = s.status === 'failed' && (s.error as { retryable?: unknown } | null)?.retryable === false;
  const attempts = final
    ? `  ${s.attempt > 1 ? `attempt ${s.attempt}, ` : ''}not retryable`
    : s.attempt > 1 || (s.status === 'failed' && s.maxAttempts !== null && s.maxAttempts > 1)
      ? `  attempt ${s.attempt}${s.maxAttempts !== null && s.attempt <= s.maxAttempts ? `/${s.maxAttempts}` : ''}`
      : '';
  switch (s.status) {
    case 'done':
      if (s.kind === 'fork') return `done: ${describeFanout(s.result)}`;
      if (s.kind === 'gate' || s.kind === 'timer') return `done after waiting${dur}${s.readiedBy ? ` (readied by ${s.readiedBy})` : ''}`;
      if (s.signal) return `done after waiting${dur} for ${describeSignalWait(s.signal)}${receivedSignal(s.result)}`;
      return `done${dur}${attempts}`;
    case 'failed':
      if (s.kind === 'gate' || s.kind === 'timer') return `failed after waiting${dur}${s.readiedBy ? ` (readied by ${s.readiedBy})` : ''}`;
      if (s.signal) return `failed after waiting${dur} for ${describeSignalWait(s.signal)}`;
      return `failed${dur}${attempts}`;
    case 'running':
      return `running for${dur}${attempts}${s.progress ? `, progress ${formatProgress(s.progress)}` : ''}`;
    case 'cancelled':
      return `cancelled${attempts}`;
    case 'pending': {
      if (s.childId !== null) return `waiting for sub-workflow ${s.childId}${s.child ? ` (${s.child.workflow.status})` : ''}`;
      if (s.signal) return `${signalWaitText(s.signal, now, s.expiresAt)} → ${sendSignalCommand(s.signal)}`;
      if (s.tool !== null) return `with the workers (${s.tool})${attempts}${s.progress ? `, progress ${formatProgress(s.progress)}` : ''}`;
      const since = formatDuration(between(s.createdAt, now) ?? 0);
      const expires = s.expiresAt ? `, expires in ${formatDuration(between(now, s.expiresAt) ?? 0)}` : '';
      return `waiting for approval (${since}${expires})${s.approve ? ` → ${s.approve}` : ' (not yours to approve)'}`;
    }
    case 'ready': {
      const wait = s.readyAt ? (between(now, s.readyAt) ?? 0) : 0;
      if (wait <= 0) return `ready, waiting for an executor${attempts}`;
      if (s.kind === 'timer') return `timer: wakes at ${formatClock(s.readyAt!)} (in ${formatDuration(wait)})`;
      return `retry in ${formatDuration(wait)}${attempts}`;
    }
  }
}

/** `: got signal 17 from role shop` from a signal wait's result ({id, name, key, payload, at, role}). */
function receivedSignal(result: unknown): string {
  const r = (result ?? {}) as { id?: unknown; name?: unknown; role?: unknown };
  if (r.id === undefined) return '';
  return `: got ${typeof r.name === 'string' ? r.name : 'signal'} #${String(r.id)}${typeof r.role === 'string' ? ` from role ${r.role}` : ''}`;
}

function describeFanout(result: unknown): string {
  const r = (result ?? {}) as { branches?: unknown; items?: unknown };
  if (Array.isArray(r.branches)) return `fanned out to ${r.branches.length} branch(es)`;
  if (Array.isArray(r.items)) return `fanned out over ${r.items.length} item(s)`;
  return 'fanned out';
}

function label(s: StepView): string {
  const what = s.kind === 'tool' || (s.kind === 'unknown' && s.tool) ? (s.tool ?? '') : s.kind === 'unknown' ? '' : s.kind;
  return `${s.name}${what ? ` (${what})` : ''}  #${s.id}`;
}

/** The tree as text lines. */
export function renderStatus(view: StatusView, now: Date = new Date()): string[] {
  const wf = view.workflow;
  const lines: string[] = [];
  const took = wf.durationMs === null ? wf.status : wf.status === 'running' ? `running for ${formatDuration(wf.durationMs)}` : `${wf.status} in ${formatDuration(wf.durationMs)}`;
  lines.push(`workflow ${wf.id} "${wf.name}": ${took}${wf.createdBy ? `  (as ${wf.createdBy})` : ''}`);
  if (wf.usage) lines.push(`  usage: ${describeUsage(wf.usage)}`);
  if (wf.error) {
    lines.push(`  error: ${formatError(wf.error)}`);
    const issues = (wf.error as { issues?: unknown }).issues;
    if (Array.isArray(issues)) {
      for (const i of issues as { path?: string; message?: string }[]) lines.push(`    ${i.path || '(flow)'}: ${i.message}`);
    }
  }
  const walk = (nodes: StepNode[], prefix: string) => {
    nodes.forEach((n, i) => {
      const last = i === nodes.length - 1;
      const spent = n.step.usage ? `  [${describeUsage(n.step.usage)}]` : '';
      lines.push(`${prefix}${last ? '└─ ' : '├─ '}${label(n.step)}  ${describeStep(n.step, now)}${spent}`);
      const inner = `${prefix}${last ? '   ' : '│  '}`;
      if (n.step.error && n.step.status === 'failed') lines.push(`${inner}error: ${formatError(n.step.error)}`);
      const child = n.step.child;
      if (child) {
        // The sub-workflow's own steps, nested under the step that waits (or waited) for it.
        lines.push(`${inner}↳ workflow ${child.workflow.id} "${child.workflow.name}": ${child.workflow.status}`);
        walk(buildTree(child.steps), `${inner}  `);
      }
      n.branches.forEach((b, bi) => {
        const lastBranch = bi === n.branches.length - 1;
        const tag = b.index === null ? 'branch' : n.step.kind === 'fork' && Array.isArray((n.step.result as { branches?: unknown } | null)?.branches)
          ? `branch ${b.index}: ${String(((n.step.result as { branches: unknown[] }).branches)[b.index] ?? b.index)}`
          : `item ${b.index}`;
        lines.push(`${inner}${lastBranch ? '└─ ' : '├─ '}[${tag}]`);
        walk(b.steps, `${inner}${lastBranch ? '   ' : '│  '}`);
      });
    });
  };
  if (view.steps.length === 0) lines.push(wf.status === 'new' ? '  (no steps yet: waiting for an executor to admit it)' : '  (no steps)');
  walk(buildTree(view.steps), '');
  if (wf.status === 'completed' && wf.output !== undefined) lines.push(`output: ${compactJson(wf.output, 500)}`);
  lines.push(...renderWaitingGates(view.waiting));
  for (const w of view.signals) {
    const where = w.workflowId !== undefined ? ` in sub-workflow ${w.workflowId}` : '';
    lines.push(`waiting: step ${w.stepId} (${w.name})${where} ${signalWaitText(w, now, w.expiresAt)} — send it: ${w.send} --payload '{…}'`);
  }
  return lines;
}
