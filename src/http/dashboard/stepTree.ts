/**
 * A workflow's step rows as nested HTML lists: the same tree as `stepd status` (buildTree in
 * src/api/views/statusText.ts): fan-out rows under their fork, grouped by branch or item, every attempt
 * its own row; arguments, results and errors folded in <details> (each with a stable key so a
 * live refresh keeps it open).
 */
import { isGate, type StepView } from '../../api/views/statusView.js';
import { buildTree, describeStep, type StepNode } from '../../api/views/statusText.js';
import { signalWaitText } from '../../api/views/signalWait.js';
import { compactJson, formatDuration, formatError } from '../../api/views/format.js';
import { html, prettyJson, type Html } from '../html.js';
import { describeUsage } from '../../usage/stepUsage.js';

export function renderStepTree(steps: StepView[], now: Date = new Date()): Html {
  if (steps.length === 0) return html`<p class="muted">No steps yet.</p>`;
  return html`<ul class="tree" id="steps">${buildTree(steps).map((n) => stepItem(n, now))}</ul>`;
}

function stepItem(node: StepNode, now: Date): Html {
  const s = node.step;
  return html`<li data-step-id="${s.id}" data-step-name="${s.name}" data-status="${s.status}">
  <div class="step-head">
    <strong>${s.name}</strong>
    <span class="muted">${kindLabel(s)}</span>
    <span class="status s-${s.status}">${s.status}</span>
    <span>${stepSummary(s, now)}</span>
    ${s.usage ? html`<span class="muted usage">${describeUsage(s.usage)}</span>` : ''}
    <span class="muted">#${s.id}</span>
  </div>
  ${s.status === 'failed' && s.error ? html`<div class="error">${formatError(s.error)}</div>` : ''}
  ${folded(`args-${s.id}`, 'arguments', s.args)}
  ${folded(`result-${s.id}`, 'result', s.result)}
  ${s.error ? folded(`error-${s.id}`, 'error details', s.error) : ''}
  ${s.childId ? html`<div>sub-workflow <a href="/workflows/${s.childId}">${s.childId}</a>${s.child ? html` <span class="status s-${s.child.workflow.status}">${s.child.workflow.status}</span>` : ''}</div>` : ''}
  ${s.readiedBy ? html`<div class="muted">readied by ${s.readiedBy}${s.readiedAt ? html` at <time datetime="${s.readiedAt}">${s.readiedAt}</time>` : ''}</div>` : ''}
  ${node.branches.map(
    (b) => html`<ul><li data-branch="${b.index ?? ''}"><span class="branch">${branchLabel(s, b.index)}</span><ul>${b.steps.map((n) => stepItem(n, now))}</ul></li></ul>`,
  )}
</li>`;
}

function kindLabel(s: StepView): string {
  if (s.tool) return s.tool;
  return s.kind === 'unknown' ? '' : s.kind;
}

function stepSummary(s: StepView, now: Date): string {
  if (isGate(s)) return `waiting for approval since ${formatDuration(Math.max(0, now.getTime() - Date.parse(s.createdAt)))}`;
  if (s.status === 'pending' && s.signal) return signalWaitText(s.signal, now, s.expiresAt);
  return describeStep(s, now).replace(/^(done|failed|cancelled):?\s*/, '').replace(/^running for/, 'for');
}

function branchLabel(fork: StepView, index: number | null): string {
  if (index === null) return 'branch';
  const result = fork.result as { branches?: unknown; items?: unknown } | null;
  if (Array.isArray(result?.branches)) return `branch ${index}: ${String(result.branches[index] ?? index)}`;
  if (Array.isArray(result?.items) && index < result.items.length) return `item ${index}: ${compactJson(result.items[index], 80)}`;
  return `item ${index}`;
}

/** A JSON value folded in <details>; nothing for null / undefined. */
export function folded(key: string, label: string, value: unknown): Html | '' {
  if (value === null || value === undefined) return '';
  return html`<details data-key="${key}"><summary>${label}</summary><pre>${prettyJson(value)}</pre></details>`;
}
