/**
 * Where each node and edge of a flow graph goes, computed on the server by `@dagrejs/dagre`
 * (layered layout, top to bottom): node boxes sized from their (already shortened) text, edges as
 * polylines with a point for their label. The page draws the result as SVG (flowSvg.ts).
 */
import dagre from '@dagrejs/dagre';
import type { FlowGraph, GraphEdge, GraphNode } from '../../flow/flowGraph.js';

export interface PlacedNode {
  node: GraphNode;
  /** Centre, width and height in SVG units (pixels). */
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface PlacedEdge {
  edge: GraphEdge;
  points: { x: number; y: number }[];
  /** Where its label goes (dagre's label position), when it has one. */
  labelAt?: { x: number; y: number };
}

export interface FlowLayout {
  width: number;
  height: number;
  nodes: PlacedNode[];
  edges: PlacedEdge[];
}

export const NODE_HEIGHT = 54;
const CHAR_WIDTH = 7.6;

/** A node's width from the longest of its lines (each already cut to a few dozen characters; wide characters, CJK and emoji, count twice). */
export function nodeWidth(lines: string[]): number {
  const longest = Math.max(...lines.map(textUnits));
  return Math.min(480, Math.max(120, 24 + longest * CHAR_WIDTH));
}

function textUnits(line: string): number {
  let units = 0;
  for (const ch of line) units += ch.codePointAt(0)! >= 0x1100 ? 2 : 1;
  return units;
}

export function layoutFlow(graph: FlowGraph, nodeLines: (n: GraphNode) => string[], edgeLabel: (e: GraphEdge) => string): FlowLayout {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'TB', nodesep: 28, ranksep: 46, edgesep: 12, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.id, { width: nodeWidth(nodeLines(n)), height: NODE_HEIGHT });
  graph.edges.forEach((e, i) => {
    const label = edgeLabel(e);
    g.setEdge(e.from, e.to, label ? { width: Array.from(label).length * 6 + 8, height: 14, labelpos: 'c' } : {}, `e${i}`);
  });
  dagre.layout(g);
  const nodes = graph.nodes.map((n): PlacedNode => {
    const l = g.node(n.id);
    return { node: n, x: l.x ?? 0, y: l.y ?? 0, width: l.width, height: l.height };
  });
  const edges = graph.edges.map((e, i): PlacedEdge => {
    const l = g.edge(e.from, e.to, `e${i}`);
    const placed: PlacedEdge = { edge: e, points: (l.points ?? []).map((p: { x: number; y: number }) => ({ x: p.x, y: p.y })) };
    if (edgeLabel(e) && typeof l.x === 'number' && typeof l.y === 'number') placed.labelAt = { x: l.x, y: l.y };
    return placed;
  });
  const size = g.graph();
  return { width: Math.ceil(size.width ?? 0), height: Math.ceil(size.height ?? 0), nodes, edges };
}
