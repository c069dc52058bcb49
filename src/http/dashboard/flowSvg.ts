/**
 * The flow graph as inline SVG: a box per step (class `st-<state>` colours it by the state of its
 * latest rows), an arrow per edge (class `ek-<kind>`: next, branch, default, parallel, forEach,
 * join, onError), labels shortened by labelText and escaped by the `html` tag. A sub-workflow's
 * box links to its child's page. No script and no style attribute: the page's style sheet (this
 * file's FLOW_PICTURE_STYLE) does the colours, so the Content-Security-Policy stays as it is.
 */
import type { FlowGraph, GraphEdge, GraphNode, NodeState } from '../../flow/flowGraph.js';
import { html, type Html } from '../html.js';
import { NODE_HEIGHT, layoutFlow, type FlowLayout, type PlacedEdge, type PlacedNode } from './flowLayout.js';
import { labelText } from './labelText.js';

const NAME_CHARS = 30;
const DETAIL_CHARS = 34;
const EDGE_LABEL_CHARS = 24;
const TITLE_CHARS = 600;

export const STATE_LABELS: Record<NodeState, string> = {
  none: 'not reached',
  pending: 'pending',
  waiting: 'waiting',
  ready: 'ready',
  running: 'running',
  done: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
};

/** The three lines of a step's box: its name, what it is, its state. */
export function nodeLines(n: GraphNode): [string, string, string] {
  return [labelText(n.id, NAME_CHARS), labelText(`${n.start ? '▶ ' : ''}${n.detail}${n.ends ? ` → ends (${n.ends})` : ''}`, DETAIL_CHARS), stateLine(n)];
}

/** `running`, `3 done · 1 failed`, plus items, retries and lost attempts when there are any. */
export function stateLine(n: GraphNode): string {
  const places = Object.values(n.counts).reduce((a, b) => a + (b ?? 0), 0);
  const parts =
    places > 1
      ? (Object.entries(n.counts) as [NodeState, number][]).sort((a, b) => b[1] - a[1]).map(([s, c]) => `${c} ${STATE_LABELS[s]}`)
      : [STATE_LABELS[n.state]];
  if (n.items !== undefined) parts.push(`${n.items} item${n.items === 1 ? '' : 's'}`);
  if (n.retries > 0) parts.push(`${n.retries} retr${n.retries === 1 ? 'y' : 'ies'}`);
  if (n.lost > 0) parts.push(`${n.lost} lost`);
  if (n.child?.status) parts.push(`child ${n.child.status}`);
  return parts.join(' · ');
}

export function edgeLabel(e: GraphEdge): string {
  return e.label ? labelText(e.label, EDGE_LABEL_CHARS) : '';
}

export function renderFlowSvg(graph: FlowGraph, layout: FlowLayout = layoutFlow(graph, nodeLines, edgeLabel)): Html {
  const w = Math.max(layout.width, 1);
  const h = Math.max(layout.height, 1);
  return html`<svg class="flow-graph" id="flow-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-labelledby="flow-graph-title">
<title id="flow-graph-title">The flow's steps and their states</title>
<defs><marker id="flow-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path class="arrow-head" d="M0,0 L10,5 L0,10 z"/></marker></defs>
<g class="edges">${layout.edges.map(edgeSvg)}</g>
<g class="edge-labels">${layout.edges.map(edgeLabelSvg)}</g>
<g class="nodes">${layout.nodes.map(nodeSvg)}</g>
</svg>`;
}

function edgeSvg(p: PlacedEdge): Html {
  if (p.points.length === 0) return html``;
  const d = p.points.map((pt, i) => `${i === 0 ? 'M' : 'L'}${round(pt.x)},${round(pt.y)}`).join(' ');
  return html`<g class="edge ek-${p.edge.kind}" data-from="${p.edge.from}" data-to="${p.edge.to}" data-kind="${p.edge.kind}">
<title>${labelText(`${p.edge.kind}: ${p.edge.from} → ${p.edge.to}${p.edge.label ? ` (${p.edge.label})` : ''}`, TITLE_CHARS)}</title>
<path d="${d}" marker-end="url(#flow-arrow)"/>
</g>`;
}

/** Labels after every line, so no later line crosses them; a halo in the page's colour keeps them readable. */
function edgeLabelSvg(p: PlacedEdge): Html {
  const label = edgeLabel(p.edge);
  if (!label || !p.labelAt) return html``;
  return html`<text class="edge-label ek-${p.edge.kind}" x="${round(p.labelAt.x)}" y="${round(p.labelAt.y + 4)}" text-anchor="middle">${label}</text>`;
}

function nodeSvg(p: PlacedNode): Html {
  const n = p.node;
  const [name, detail, state] = nodeLines(n);
  const box = html`<g class="node st-${n.state} nk-${n.kind}${n.start ? ' start' : ''}" data-step="${n.id}" data-state="${n.state}" data-kind="${n.kind}" transform="translate(${round(p.x - p.width / 2)},${round(p.y - p.height / 2)})">
<title>${labelText(`${n.id} (${n.detail}): ${stateLine(n)}; ${n.rows} row(s)`, TITLE_CHARS)}</title>
<rect width="${round(p.width)}" height="${NODE_HEIGHT}" rx="7"/>
<text class="node-name" x="10" y="17">${name}</text>
<text class="node-detail" x="10" y="32">${detail}</text>
<text class="node-state" x="10" y="47">${state}</text>
</g>`;
  return n.child ? html`<a href="/workflows/${encodeURIComponent(n.child.id)}" class="node-link">${box}</a>` : box;
}

function round(v: number): number {
  return Math.round(v * 10) / 10;
}

/** The picture's colours, appended to the dashboard's style sheet (light and dark). */
export const FLOW_PICTURE_STYLE = `
.picture { overflow: auto; border: 1px solid var(--line); border-radius: 6px; padding: .4em; margin: .4em 0 1em; max-height: 70em; }
.flow-graph text, .timeline text { font: 12px system-ui, sans-serif; fill: currentColor; }
.flow-graph .node rect { stroke-width: 1.5; fill: #8881; stroke: var(--muted); }
.flow-graph .node.start rect { stroke-width: 2.5; }
.flow-graph .node-name { font-weight: 600; } .flow-graph .node-detail, .flow-graph .edge-label { fill: var(--muted); }
.flow-graph .edge-label { paint-order: stroke; stroke: #fff; stroke-width: 5px; stroke-linejoin: round; } .flow-graph .edge-label.ek-onError { fill: var(--bad); }
@media (prefers-color-scheme: dark) { .flow-graph .edge-label { stroke: #121212; } }
.flow-graph .edge path { fill: none; stroke: var(--muted); stroke-width: 1.3; } .arrow-head { fill: var(--muted); }
.flow-graph .ek-onError path { stroke: var(--bad); stroke-dasharray: 5 3; } .flow-graph .ek-join path { stroke-dasharray: 2 3; }
.flow-graph .ek-parallel path, .flow-graph .ek-forEach path { stroke-width: 2; }
.flow-graph .node.st-done rect, .bar.st-done { fill: #1a7f3733; stroke: var(--ok); } .flow-graph .node.st-failed rect, .bar.st-failed { fill: #cf222e33; stroke: var(--bad); }
.flow-graph .node.st-running rect, .bar.st-running { fill: #0969da40; stroke: var(--run); } .flow-graph .node.st-ready rect, .bar.st-ready { fill: #0969da18; stroke: var(--run); }
.flow-graph .node.st-waiting rect, .flow-graph .node.st-pending rect, .bar.st-waiting, .bar.st-pending { fill: #9a670026; stroke: var(--wait); }
.flow-graph .node.st-cancelled rect, .bar.st-cancelled { fill: #7773; stroke: var(--muted); }
.flow-graph .node.st-none rect { fill: none; stroke: var(--line); stroke-dasharray: 4 3; } .flow-graph .node.st-none text { fill: var(--muted); }
.flow-graph .node.st-running rect { stroke-width: 2.5; }
.timeline .bar { stroke-width: 1; } .timeline .wait { fill: #9a670030; stroke: none; } .timeline .lost { stroke-dasharray: 3 2; stroke-width: 2; }
.timeline .axis line { stroke: var(--line); } .timeline .axis text, .timeline .row-label .muted { fill: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: .3em .9em; font-size: .85em; color: var(--muted); margin: .2em 0; }
.legend i { display: inline-block; width: 1.1em; height: .8em; border: 1.5px solid; border-radius: 3px; vertical-align: middle; margin-right: .3em; }
.legend .l-done { border-color: var(--ok); background: #1a7f3733; } .legend .l-failed { border-color: var(--bad); background: #cf222e33; }
.legend .l-running, .legend .l-ready { border-color: var(--run); background: #0969da40; } .legend .l-waiting { border-color: var(--wait); background: #9a670026; }
.legend .l-cancelled { border-color: var(--muted); background: #7773; } .legend .l-none { border-color: var(--line); border-style: dashed; }
.legend .l-wait { border-color: transparent; background: #9a670030; } .legend .l-lost { border-style: dashed; border-color: var(--bad); }
`;
