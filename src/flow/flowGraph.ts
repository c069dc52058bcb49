/**
 * A workflow's flow as a graph with the state of each step: pure (a compiled flow and the
 * workflow's step rows in, nodes and edges out), so the dashboard's picture is tested without a
 * database or a browser.
 *
 * - Every flow step is a node, coloured by the state of its latest row in each place it ran (a
 *   fan-out's item or branch, a retry's last attempt); a step no row reached is `none`.
 * - Edges: `next`, `branch` (labelled with its condition) and `default`, `parallel` (fork to each
 *   branch), `forEach` (fork to the step run per item), `join` (a branch's end to its fan-out's
 *   join), `onError`.
 * - At most `maxNodes` steps are drawn, taken in the order a walk from `start` meets them (then
 *   the rest in the flow's order); the graph says how many were left out.
 */
import type { CompiledFlow, CompiledStep, StepKind } from './compiled.js';

export type NodeState = 'none' | 'pending' | 'waiting' | 'ready' | 'running' | 'done' | 'failed' | 'cancelled';
export type EdgeKind = 'next' | 'branch' | 'default' | 'parallel' | 'forEach' | 'join' | 'onError';

/** What the graph needs of a step row (the dashboard's StepView has it all). */
export interface GraphRow {
  id: string;
  name: string;
  status: 'pending' | 'ready' | 'running' | 'done' | 'failed' | 'cancelled';
  attempt: number;
  fanoutId: string | null;
  itemIndex: number | null;
  error: unknown;
  /** A forEach fork's result holds its items. */
  result?: unknown;
  readyAt: string | null;
  childId: string | null;
  /** The child workflow's status, when it was loaded. */
  childStatus?: string;
}

export interface GraphNode {
  /** The step's name (unique in the flow). */
  id: string;
  kind: StepKind;
  tool: string | null;
  /** What the node says under the name: the tool, "approval", "forEach", "sub-workflow NAME", … */
  detail: string;
  state: NodeState;
  /** The latest row of each place the step ran, counted by state. */
  counts: Partial<Record<NodeState, number>>;
  /** Every row of the step (every attempt of every item). */
  rows: number;
  /** Rows that were another attempt (attempt > 1). */
  retries: number;
  /** Attempts that failed as `lost` (their executor stopped). */
  lost: number;
  start: boolean;
  /** The workflow ends here (done: completed / failed). */
  ends?: 'completed' | 'failed';
  /** For a forEach fork: the items of its latest row, when known. */
  items?: number;
  /** For a sub-workflow step: its latest child workflow. */
  child?: { id: string; status?: string };
}

export interface GraphEdge {
  from: string;
  to: string;
  kind: EdgeKind;
  label?: string;
}

export interface FlowGraph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** Steps in the flow. */
  totalSteps: number;
  /** Edges between drawn steps that were left out with a step. */
  omittedEdges: number;
}

/** The priority of states when a step ran in several places: the most urgent colours the node. */
const PRIORITY: NodeState[] = ['running', 'failed', 'waiting', 'ready', 'pending', 'cancelled', 'done', 'none'];

export const MAX_GRAPH_NODES = 150;

export function flowGraph(flow: CompiledFlow, rows: readonly GraphRow[], opts: { now?: Date; maxNodes?: number } = {}): FlowGraph {
  const now = opts.now ?? new Date();
  const maxNodes = opts.maxNodes ?? MAX_GRAPH_NODES;
  const allEdges = flowEdges(flow);
  const order = walkOrder(flow, allEdges);
  const drawn = new Set(order.slice(0, maxNodes));
  const byName = groupRows(rows);
  const nodes = order.slice(0, maxNodes).map((name) => stepNode(flow, flow.steps.get(name)!, byName.get(name) ?? [], now));
  const edges = allEdges.filter((e) => drawn.has(e.from) && drawn.has(e.to)).map((e) => withItems(e, nodes));
  return { nodes, edges, totalSteps: flow.steps.size, omittedEdges: allEdges.length - edges.length };
}

/** A forEach edge says how many items its fork's latest row fanned out, once it has. */
function withItems(e: GraphEdge, nodes: GraphNode[]): GraphEdge {
  if (e.kind !== 'forEach') return e;
  const items = nodes.find((n) => n.id === e.from)?.items;
  return items === undefined ? e : { ...e, label: `${e.label ?? 'each item'}`.replace(/^each item/, `each of ${items} item${items === 1 ? '' : 's'}`) };
}

/** The state a row shows: a pending row waits (for an approval, a signal, a child, a timer); a ready row not due yet waits too (a retry's backoff, a timer). */
export function rowState(row: Pick<GraphRow, 'status' | 'readyAt'>, now: Date): NodeState {
  if (row.status === 'pending') return 'waiting';
  if (row.status === 'ready' && row.readyAt !== null && Date.parse(row.readyAt) > now.getTime()) return 'waiting';
  return row.status;
}

/** The edges the flow defines, in the flow's order. */
export function flowEdges(flow: CompiledFlow): GraphEdge[] {
  const edges: GraphEdge[] = [];
  for (const step of flow.steps.values()) {
    const t = step.transition;
    switch (t.kind) {
      case 'next':
        edges.push({ from: step.name, to: t.to, kind: 'next' });
        break;
      case 'branch':
        t.cases.forEach((c, i) => edges.push({ from: step.name, to: c.then, kind: 'branch', label: step.spec.branch?.[i]?.if ?? `case ${i + 1}` }));
        if (t.default !== undefined) edges.push({ from: step.name, to: t.default, kind: 'default', label: 'default' });
        break;
      case 'parallel':
        t.branches.forEach((b, i) => edges.push({ from: step.name, to: b, kind: 'parallel', label: t.conditions?.[i] ? `if ${t.conditions[i].source}` : `branch ${i}` }));
        break;
      case 'forEach':
        edges.push({ from: step.name, to: t.step, kind: 'forEach', label: t.concurrency < 10_000 ? `each item (${t.concurrency} at a time)` : 'each item' });
        break;
      default:
        break;
    }
    if (step.onError !== undefined) edges.push({ from: step.name, to: step.onError, kind: 'onError', label: 'onError' });
  }
  edges.push(...joinEdges(flow));
  return edges;
}

/**
 * A fan-out's branches end by arriving at its join: an edge from each chain end (a step whose
 * transition is `arrive`) met walking from the branch starts, a nested fan-out passed over to its
 * own join.
 */
function joinEdges(flow: CompiledFlow): GraphEdge[] {
  const edges: GraphEdge[] = [];
  const seen = new Set<string>();
  for (const fork of flow.steps.values()) {
    const t = fork.transition;
    if (t.kind !== 'parallel' && t.kind !== 'forEach') continue;
    const join = t.join;
    if (join === undefined) continue;
    const visited = new Set<string>();
    const stack = t.kind === 'parallel' ? [...t.branches] : [t.step];
    while (stack.length > 0) {
      const name = stack.pop()!;
      if (visited.has(name) || name === join) continue;
      visited.add(name);
      const step = flow.steps.get(name);
      if (!step) continue;
      stack.push(...successorsInRegion(step));
      if (step.transition.kind === 'arrive') {
        const key = `${name}\u0000${join}`;
        if (!seen.has(key)) edges.push({ from: name, to: join, kind: 'join', label: 'join' });
        seen.add(key);
      }
    }
  }
  return edges;
}

function successorsInRegion(step: CompiledStep): string[] {
  const t = step.transition;
  const out: string[] = step.onError !== undefined ? [step.onError] : [];
  if (t.kind === 'next') out.push(t.to);
  else if (t.kind === 'branch') out.push(...t.cases.map((c) => c.then), ...(t.default !== undefined ? [t.default] : []));
  else if ((t.kind === 'parallel' || t.kind === 'forEach') && t.join !== undefined) out.push(t.join);
  return out;
}

/** Steps breadth-first from `start` along the edges, then any the walk did not meet, in the flow's order. */
function walkOrder(flow: CompiledFlow, edges: GraphEdge[]): string[] {
  const out = new Map<string, string[]>();
  for (const e of edges) out.set(e.from, [...(out.get(e.from) ?? []), e.to]);
  const order: string[] = [];
  const seen = new Set<string>();
  const queue = [flow.start];
  while (queue.length > 0) {
    const name = queue.shift()!;
    if (seen.has(name) || !flow.steps.has(name)) continue;
    seen.add(name);
    order.push(name);
    queue.push(...(out.get(name) ?? []));
  }
  for (const name of flow.steps.keys()) if (!seen.has(name)) order.push(name);
  return order;
}

function groupRows(rows: readonly GraphRow[]): Map<string, GraphRow[]> {
  const byName = new Map<string, GraphRow[]>();
  for (const r of rows) {
    const list = byName.get(r.name);
    if (list) list.push(r);
    else byName.set(r.name, [r]);
  }
  return byName;
}

function stepNode(flow: CompiledFlow, step: CompiledStep, rows: GraphRow[], now: Date): GraphNode {
  // The latest row of each place the step ran: a retry or a loop's next visit replaces the earlier one.
  const latest = new Map<string, GraphRow>();
  for (const r of rows) {
    const key = `${r.fanoutId ?? ''}/${r.itemIndex ?? ''}`;
    const prev = latest.get(key);
    if (!prev || BigInt(r.id) > BigInt(prev.id)) latest.set(key, r);
  }
  const counts: Partial<Record<NodeState, number>> = {};
  for (const r of latest.values()) {
    const s = rowState(r, now);
    counts[s] = (counts[s] ?? 0) + 1;
  }
  const state = PRIORITY.find((s) => counts[s]) ?? 'none';
  const node: GraphNode = {
    id: step.name,
    kind: step.kind,
    tool: step.tool,
    detail: detailOf(step),
    state,
    counts,
    rows: rows.length,
    retries: rows.filter((r) => r.attempt > 1).length,
    lost: rows.filter((r) => (r.error as { code?: unknown } | null)?.code === 'lost').length,
    start: step.name === flow.start,
  };
  if (step.transition.kind === 'done') node.ends = step.transition.status;
  const newest = rows.length ? rows.reduce((a, b) => (BigInt(b.id) > BigInt(a.id) ? b : a)) : undefined;
  if (step.kind === 'fork' && step.transition.kind === 'forEach' && newest) {
    const items = newest.result as { items?: unknown } | null | undefined;
    if (Array.isArray(items?.items)) node.items = items.items.length;
  }
  const withChild = rows.filter((r) => r.childId !== null);
  if (withChild.length) {
    const c = withChild[withChild.length - 1]!;
    node.child = { id: c.childId!, ...(c.childStatus !== undefined ? { status: c.childStatus } : {}) };
  }
  return node;
}

function detailOf(step: CompiledStep): string {
  const t = step.transition;
  switch (step.kind) {
    case 'tool':
      return step.tool ?? 'tool';
    case 'gate':
      return 'approval';
    case 'timer':
      return 'wait';
    case 'signal':
      return 'signal';
    case 'workflow':
      return `sub-workflow ${step.workflow?.name ?? ''}`.trim();
    case 'fork':
      return t.kind === 'forEach' ? `forEach${t.mode === 'allSettled' ? ' (allSettled)' : ''}` : `parallel${t.kind === 'parallel' && t.mode === 'allSettled' ? ' (allSettled)' : ''}`;
    default:
      return t.kind === 'branch' ? 'branch' : 'pass';
  }
}
