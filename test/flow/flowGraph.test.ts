import { describe, expect, it } from 'vitest';
import { flowGraph, rowState, type GraphRow } from '../../src/flow/flowGraph.js';
import { compileFlow } from '../../src/flow/validate.js';

function compiled(raw: unknown) {
  const c = compileFlow(raw);
  if (!c.ok) throw new Error(JSON.stringify(c.issues));
  return c.flow;
}

let nextId = 1;
function row(name: string, status: GraphRow['status'], extra: Partial<GraphRow> = {}): GraphRow {
  return { id: String(nextId++), name, status, attempt: 1, fanoutId: null, itemIndex: null, error: null, readyAt: null, childId: null, ...extra };
}

const NOW = new Date('2026-11-27T12:00:00Z');

const everything = {
  start: 'fetch',
  steps: {
    fetch: { tool: 'http.request', args: { url: 'https://example.com' }, onError: 'alert', next: 'route' },
    route: { branch: [{ if: 'steps.fetch.result.status == 200', then: 'fan' }], default: 'alert' },
    fan: { parallel: ['left', 'right'], join: 'each' },
    left: { tool: 'core.echo', next: 'left2' },
    left2: { tool: 'core.echo' },
    right: { approval: true },
    each: { forEach: { items: '{{input.xs}}', step: 'work', concurrency: 2 }, join: 'child' },
    work: { tool: 'core.echo', args: { x: '{{item}}' } },
    child: { workflow: { name: 'review' }, next: 'end' },
    end: { tool: 'core.echo', done: true },
    alert: { tool: 'core.fail', done: { status: 'failed', error: 'fetch failed' } },
  },
};

describe('flowGraph: nodes and edges from a flow', () => {
  it('has a node per step and an edge per next, branch, default, parallel, forEach, join and onError', () => {
    const g = flowGraph(compiled(everything), [], { now: NOW });
    expect(g.nodes.map((n) => n.id)).toEqual(['fetch', 'route', 'alert', 'fan', 'left', 'right', 'left2', 'each', 'work', 'child', 'end']);
    expect(g.totalSteps).toBe(11);
    const edges = g.edges.map((e) => `${e.from} -${e.kind}-> ${e.to}${e.label ? ` [${e.label}]` : ''}`).sort();
    expect(edges).toEqual(
      [
        'child -next-> end',
        'each -forEach-> work [each item (2 at a time)]',
        'fan -parallel-> left [branch 0]',
        'fan -parallel-> right [branch 1]',
        'fetch -next-> route',
        'fetch -onError-> alert [onError]',
        'left -next-> left2',
        'left2 -join-> each [join]',
        'right -join-> each [join]',
        'route -branch-> fan [steps.fetch.result.status == 200]',
        'route -default-> alert [default]',
        'work -join-> child [join]',
      ].sort(),
    );
    const byId = new Map(g.nodes.map((n) => [n.id, n]));
    expect(byId.get('fetch')).toMatchObject({ start: true, kind: 'tool', detail: 'http.request', state: 'none' });
    expect(byId.get('right')).toMatchObject({ kind: 'gate', detail: 'approval' });
    expect(byId.get('each')).toMatchObject({ kind: 'fork', detail: 'forEach' });
    expect(byId.get('fan')).toMatchObject({ kind: 'fork', detail: 'parallel' });
    expect(byId.get('child')).toMatchObject({ kind: 'workflow', detail: 'sub-workflow review' });
    expect(byId.get('end')).toMatchObject({ ends: 'completed' });
    expect(byId.get('alert')).toMatchObject({ ends: 'failed' });
  });

  it("reads the seed's flat form, where the branches name the join they arrive at", () => {
    const flat = {
      start: { name: 'split', parallel: ['a', 'b'] },
      a: { tool: 'core.echo', join: 'merge' },
      b: { tool: 'core.echo', join: 'merge' },
      merge: { tool: 'core.echo' },
    };
    const g = flowGraph(compiled(flat), [], { now: NOW });
    expect(g.edges.filter((e) => e.kind === 'join').map((e) => `${e.from}->${e.to}`).sort()).toEqual(['a->merge', 'b->merge']);
  });

  it('draws at most maxNodes steps, in the order a walk from the start meets them, and counts what it left out', () => {
    const steps: Record<string, unknown> = {};
    for (let i = 0; i < 2000; i++) steps[`s${i}`] = { tool: 'core.echo', ...(i < 1999 ? { next: `s${i + 1}` } : { done: true }) };
    const g = flowGraph(compiled({ start: 's0', steps }), [row('s0', 'done'), row('s1999', 'running')], { now: NOW, maxNodes: 150 });
    expect(g.nodes).toHaveLength(150);
    expect(g.totalSteps).toBe(2000);
    expect(g.nodes[0]).toMatchObject({ id: 's0', state: 'done' });
    expect(g.nodes[149]!.id).toBe('s149');
    expect(g.edges).toHaveLength(149);
    expect(g.omittedEdges).toBe(1999 - 149);
  });
});

describe('flowGraph: states from the rows', () => {
  const flow = compiled({
    start: 'each',
    steps: {
      each: { forEach: { items: '{{input.xs}}', step: 'work' }, join: 'gate' },
      work: { tool: 'core.echo', retry: { maxAttempts: 3 } },
      gate: { approval: true, next: 'sub' },
      sub: { workflow: { name: 'child' } },
    },
  });

  it('colours a step by the latest row of each place it ran: a retry replaces its failed attempt', () => {
    const fork = row('each', 'done', { result: { items: ['a', 'b', 'c'] } });
    const rows = [
      fork,
      row('work', 'failed', { fanoutId: fork.id, itemIndex: 0, error: { code: 'lost', message: 'executor stopped' } }),
      row('work', 'done', { fanoutId: fork.id, itemIndex: 1 }),
      row('work', 'done', { fanoutId: fork.id, itemIndex: 0, attempt: 2 }),
      row('work', 'done', { fanoutId: fork.id, itemIndex: 2 }),
    ];
    const g = flowGraph(flow, rows, { now: NOW });
    const work = g.nodes.find((n) => n.id === 'work')!;
    expect(work).toMatchObject({ state: 'done', counts: { done: 3 }, rows: 4, retries: 1, lost: 1 });
    expect(g.nodes.find((n) => n.id === 'each')).toMatchObject({ state: 'done', items: 3 });
    expect(g.edges.find((e) => e.kind === 'forEach')).toMatchObject({ from: 'each', to: 'work', label: 'each of 3 items' });
    expect(g.nodes.find((n) => n.id === 'gate')).toMatchObject({ state: 'none', counts: {} });
  });

  it('shows the most urgent state when items differ: running, then failed, then waiting', () => {
    const fork = row('each', 'done');
    const items = (statuses: GraphRow['status'][]) => statuses.map((s, i) => row('work', s, { fanoutId: fork.id, itemIndex: i }));
    const state = (statuses: GraphRow['status'][]) => flowGraph(flow, [fork, ...items(statuses)], { now: NOW }).nodes.find((n) => n.id === 'work')!;
    expect(state(['done', 'running', 'failed'])).toMatchObject({ state: 'running', counts: { done: 1, running: 1, failed: 1 } });
    expect(state(['done', 'failed', 'ready'])).toMatchObject({ state: 'failed' });
    expect(state(['done', 'cancelled'])).toMatchObject({ state: 'cancelled' });
    expect(state(['done', 'done'])).toMatchObject({ state: 'done' });
  });

  it('a pending gate or sub-workflow step waits; a ready row not due yet (a backoff) waits too', () => {
    const g = flowGraph(flow, [row('gate', 'pending'), row('sub', 'pending', { childId: '42', childStatus: 'running' })], { now: NOW });
    expect(g.nodes.find((n) => n.id === 'gate')).toMatchObject({ state: 'waiting' });
    expect(g.nodes.find((n) => n.id === 'sub')).toMatchObject({ state: 'waiting', child: { id: '42', status: 'running' } });
    expect(rowState({ status: 'ready', readyAt: '2026-11-27T12:00:05Z' }, NOW)).toBe('waiting');
    expect(rowState({ status: 'ready', readyAt: '2026-11-27T11:59:55Z' }, NOW)).toBe('ready');
    expect(rowState({ status: 'ready', readyAt: null }, NOW)).toBe('ready');
    expect(rowState({ status: 'running', readyAt: null }, NOW)).toBe('running');
  });

  it('ignores rows of steps the flow does not have, and is the same for the same input', () => {
    const rows = [row('each', 'done'), row('gone', 'failed')];
    const a = flowGraph(flow, rows, { now: NOW });
    expect(a.nodes.map((n) => n.id)).toEqual(['each', 'work', 'gate', 'sub']);
    expect(flowGraph(flow, rows, { now: NOW })).toEqual(a);
  });
});
