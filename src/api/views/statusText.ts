/**
 * `stepd status` in words: the steps as a tree and what each is doing. The tree follows the rows:
 * top-level steps in creation order; the rows a fan-out created (fanout_id = the fork's row)
 * nested under that fork, by branch or item (item_index), each branch's steps and retry attempts
 * in order. The CLI prints renderStatus; the dashboard draws buildTree with describeStep. Pure.
 */
import { describeUsage } from '../../usage/stepUsage.js';
import { between, compactJson, formatClock, formatDuration, formatError } from './format.js';
import { formatProgress } from './progressText.js';
import { renderWaitingGates } from './gateOffers.js';
import { describeSignalWait, sendSignalCommand, signalWaitText } from './signalWait.js';
import type { StatusView, StepView } from './statusView.js';

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
  if (wf.forkedFrom) lines.push(`  forked from workflow ${wf.forkedFrom.workflowId} ${wf.forkedFrom.fromStep === null ? '(from its start)' : `at step ${JSON.stringify(wf.forkedFrom.fromStep)}`}`);
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
