/**
 * The workflow page's pictures: the flow graph with each step's live state (flowGraph.ts, laid
 * out by dagre, drawn by flowSvg.ts) and the attempts timeline (attemptsTimeline.ts). Both are
 * server-side SVG inside the page's live region, so they update with it; nothing runs in the
 * browser. Big flows and long histories are cut (MAX_GRAPH_NODES steps, MAX_TIMELINE_ROWS rows)
 * and the page says so.
 */
import type { StepView } from '../../api/views/statusView.js';
import { MAX_GRAPH_NODES, flowGraph, type GraphRow, type NodeState } from '../../flow/flowGraph.js';
import { compileFlow } from '../../flow/validate.js';
import { html, type Html } from '../html.js';
import { MAX_TIMELINE_ROWS, renderTimeline, timelineBars } from './attemptsTimeline.js';
import { STATE_LABELS, renderFlowSvg } from './flowSvg.js';
import { labelText } from './labelText.js';
import type { WorkflowPageData } from './withFlow.js';

const LEGEND: NodeState[] = ['running', 'ready', 'waiting', 'done', 'failed', 'cancelled', 'none'];

/** The pictures of a workflow page's data, when it carries the flow (withFlow.ts); nothing otherwise. */
export function renderFlowPictureOf(details: WorkflowPageData, now: Date = new Date()): Html | '' {
  return details.flow === undefined ? '' : renderFlowPicture(details.flow, details.steps, now);
}

export function renderFlowPicture(flow: unknown, steps: readonly StepView[], now: Date = new Date()): Html {
  return html`<h3>Flow</h3>
${flowSection(flow, steps, now)}
<h3>Attempts</h3>
${timelineSection(steps, now)}`;
}

function flowSection(flow: unknown, steps: readonly StepView[], now: Date): Html {
  const compiled = compileFlow(flow);
  if (!compiled.ok) {
    const first = compiled.issues[0];
    return html`<p class="muted" id="flow-graph-problem">The flow cannot be drawn: ${first ? labelText(`${first.path ? `${first.path}: ` : ''}${first.message}`, 300) : 'it does not compile'}.</p>`;
  }
  const graph = flowGraph(compiled.flow, steps.map(graphRow), { now, maxNodes: MAX_GRAPH_NODES });
  const cut = graph.totalSteps - graph.nodes.length;
  return html`<div class="legend" aria-hidden="true">${LEGEND.map((s) => html`<span><i class="l-${s}"></i>${STATE_LABELS[s]}</span>`)}<span>— next, ┄ join, <span class="error">╌ onError</span></span></div>
${cut > 0 ? html`<p class="muted" id="flow-graph-cut">Showing the first ${graph.nodes.length} of ${graph.totalSteps} steps (in the order they follow from the start); the step list below has every row.</p>` : ''}
<div class="picture">${renderFlowSvg(graph)}</div>`;
}

function timelineSection(steps: readonly StepView[], now: Date): Html {
  const timeline = timelineBars(steps, now, MAX_TIMELINE_ROWS);
  if (!timeline) return html`<p class="muted">No attempts yet.</p>`;
  return html`<div class="legend" aria-hidden="true"><span><i class="l-wait"></i>waiting (queued, backoff, approval, timer, signal, child)</span><span><i class="l-running"></i>running</span><span><i class="l-done"></i>done</span><span><i class="l-failed"></i>failed</span><span><i class="l-lost"></i>lost</span></div>
${timeline.omitted > 0 ? html`<p class="muted" id="timeline-cut">Showing the latest ${timeline.bars.length} of ${timeline.bars.length + timeline.omitted} attempts.</p>` : ''}
<div class="picture">${renderTimeline(timeline)}</div>`;
}

function graphRow(s: StepView): GraphRow {
  return {
    id: s.id,
    name: s.name,
    status: s.status,
    attempt: s.attempt,
    fanoutId: s.fanoutId,
    itemIndex: s.itemIndex,
    error: s.error,
    result: s.result,
    readyAt: s.readyAt,
    childId: s.childId,
    ...(s.child ? { childStatus: s.child.workflow.status } : {}),
  };
}
