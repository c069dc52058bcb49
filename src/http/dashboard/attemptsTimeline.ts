/**
 * A workflow's attempts on a timeline: one line per step row (every attempt of every item), a
 * pale bar for the time it waited (from its creation to its start: a retry's backoff, a queue, a
 * gate, a timer, a signal, a child workflow) and a solid bar from `started_at` to `completed_at`
 * (to now while it runs), coloured by its status; a `lost` attempt (its executor stopped) has a
 * dashed outline. `timelineBars` is pure (rows and now in, positions out); the SVG is escaped by
 * the `html` tag.
 */
import { rowState, type NodeState } from '../../flow/flowGraph.js';
import { formatDuration } from '../../api/views/format.js';
import { html, type Html } from '../html.js';
import { labelText } from './labelText.js';

export interface TimelineRow {
  id: string;
  name: string;
  status: 'pending' | 'ready' | 'running' | 'done' | 'failed' | 'cancelled';
  attempt: number;
  maxAttempts: number | null;
  itemIndex: number | null;
  error: unknown;
  createdAt: string;
  readyAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
}

export interface TimelineBar {
  row: TimelineRow;
  state: NodeState;
  lost: boolean;
  /** Milliseconds from the timeline's start. */
  waitFrom: number;
  /** Where waiting ended: the start, or the end when it never started. */
  waitTo: number;
  /** The attempt's run, when it started. */
  run?: { from: number; to: number };
}

export interface Timeline {
  /** The earliest row's creation (ISO). */
  origin: string;
  spanMs: number;
  bars: TimelineBar[];
  /** Rows left out (the oldest), past `max`. */
  omitted: number;
}

export const MAX_TIMELINE_ROWS = 200;

/** The newest `max` rows as bars, in row order. */
export function timelineBars(rows: readonly TimelineRow[], now: Date, max = MAX_TIMELINE_ROWS): Timeline | undefined {
  if (rows.length === 0) return undefined;
  const shown = [...rows].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1)).slice(-max);
  const t = (iso: string | null) => (iso === null ? undefined : Date.parse(iso));
  const origin = Math.min(...shown.map((r) => Date.parse(r.createdAt)));
  const nowMs = now.getTime();
  const bars = shown.map((r): TimelineBar => {
    const created = t(r.createdAt)!;
    const started = t(r.startedAt);
    const finished = r.status === 'done' || r.status === 'failed' || r.status === 'cancelled';
    const end = finished ? (t(r.completedAt) ?? started ?? created) : Math.max(nowMs, started ?? created);
    const bar: TimelineBar = {
      row: r,
      state: rowState(r, now),
      lost: (r.error as { code?: unknown } | null)?.code === 'lost',
      waitFrom: created - origin,
      waitTo: (started ?? end) - origin,
    };
    if (started !== undefined) bar.run = { from: started - origin, to: Math.max(started, end) - origin };
    return bar;
  });
  const spanMs = Math.max(1, ...bars.map((b) => Math.max(b.waitTo, b.run?.to ?? 0)));
  return { origin: new Date(origin).toISOString(), spanMs, bars, omitted: rows.length - shown.length };
}

const LABEL_WIDTH = 230;
const PLOT_WIDTH = 640;
const ROW_HEIGHT = 20;
const AXIS_HEIGHT = 22;

export function renderTimeline(timeline: Timeline): Html {
  const x = (ms: number) => LABEL_WIDTH + (ms / timeline.spanMs) * PLOT_WIDTH;
  const height = AXIS_HEIGHT + timeline.bars.length * ROW_HEIGHT + 6;
  const width = LABEL_WIDTH + PLOT_WIDTH + 16;
  return html`<svg class="timeline" id="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-labelledby="timeline-title">
<title id="timeline-title">Every attempt from its creation to its end</title>
<g class="axis">${ticks(timeline.spanMs).map(
    (ms) => html`<line x1="${r1(x(ms))}" y1="${AXIS_HEIGHT - 4}" x2="${r1(x(ms))}" y2="${height}"/><text x="${r1(x(ms))}" y="12" text-anchor="middle">${ms === 0 ? '0' : `+${formatDuration(ms)}`}</text>`,
  )}</g>
${timeline.bars.map((b, i) => barSvg(b, AXIS_HEIGHT + i * ROW_HEIGHT, x))}
</svg>`;
}

function barSvg(b: TimelineBar, y: number, x: (ms: number) => number): Html {
  const r = b.row;
  const where = r.itemIndex !== null ? ` [${r.itemIndex}]` : '';
  const attempt = r.maxAttempts !== null || r.attempt > 1 ? ` ${r.attempt}${r.maxAttempts !== null ? `/${r.maxAttempts}` : ''}` : '';
  const waited = b.waitTo - b.waitFrom;
  const ran = b.run ? b.run.to - b.run.from : undefined;
  const error = r.error as { code?: unknown; message?: unknown } | null;
  const why = error && typeof error === 'object' ? `; ${String(error.code ?? 'error')}: ${String(error.message ?? '')}` : '';
  const title = `${r.name}${where} attempt ${r.attempt}${r.maxAttempts !== null ? ` of ${r.maxAttempts}` : ''} (row #${r.id}): ${b.lost ? 'lost' : r.status}; waited ${formatDuration(waited)}${ran !== undefined ? `, ran ${formatDuration(ran)}` : ''}${why}`;
  const w = (from: number, to: number) => Math.max(2, r1(x(to) - x(from)));
  return html`<g class="attempt" data-step="${r.name}" data-row-id="${r.id}" data-attempt="${r.attempt}" data-state="${b.state}"${b.lost ? html` data-lost="true"` : ''}>
<title>${labelText(title, 400)}</title>
<text class="row-label" x="4" y="${y + 14}">${labelText(r.name, 24)}${where}<tspan class="muted">${attempt ? ` #${attempt.trim()}` : ''}${b.lost ? ' lost' : ''}</tspan></text>
${waited > 0 || !b.run ? html`<rect class="wait" x="${r1(x(b.waitFrom))}" y="${y + 6}" width="${w(b.waitFrom, b.waitTo)}" height="8" rx="2"/>` : ''}
${b.run ? html`<rect class="bar st-${b.state}${b.lost ? ' lost' : ''}" x="${r1(x(b.run.from))}" y="${y + 3}" width="${w(b.run.from, b.run.to)}" height="14" rx="3"/>` : ''}
</g>`;
}

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const TICK_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, SECOND, 2 * SECOND, 5 * SECOND, 10 * SECOND, 15 * SECOND, 30 * SECOND, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR];

/** At most about six round marks across the span (1, 2, 5 ms … 30 s, 1 min … 1 day apart). */
export function ticks(spanMs: number): number[] {
  const step = TICK_STEPS.find((s) => s >= spanMs / 6) ?? Math.ceil(spanMs / 6 / (24 * HOUR)) * 24 * HOUR;
  const out: number[] = [];
  for (let ms = 0; ms <= spanMs && out.length < 12; ms += step) out.push(ms);
  return out;
}

function r1(v: number): number {
  return Math.round(v * 10) / 10;
}
