/**
 * One workflow: its status and times, the buttons that apply (cancel while it is new or running,
 * retry once it failed), the gates waiting for someone with their message and approve / reject
 * forms, the steps waiting for a signal (what they wait for; no buttons), and the step tree. Everything under the title is the live region.
 */
import { describeUsage } from '../../usage/stepUsage.js';
import { mayApprove } from '../../api/flowAccess.js';
import type { WaitingGate, WaitingSignal, WorkflowDetails } from '../../api/operations.js';
import { signalWaitText } from '../../api/views/signalWait.js';
import type { StepView } from '../../api/views/statusView.js';
import { formatDuration, formatError } from '../../api/views/format.js';
import { html, type Html } from '../html.js';
import { page, type PageContext } from './layout.js';
import { utc } from '../../api/views/format.js';
import { folded, renderStepTree } from './stepTree.js';
import { renderFlowPictureOf } from './flowPicture.js';
import { forkForm } from './dayTwoActions.js';

export function renderWorkflowPage(ctx: PageContext, details: WorkflowDetails, problem?: string): Html {
  const wf = details.workflow;
  return page(ctx, {
    title: `workflow ${wf.id} ${wf.name}`,
    events: `/events?workflow=${encodeURIComponent(wf.id)}`,
    pageUrl: `/workflows/${encodeURIComponent(wf.id)}`,
    body: html`<p><a href="/">← workflows</a></p>
<h2>Workflow ${wf.id}: ${wf.name}</h2>
${problem ? html`<p class="flash" role="alert" id="problem">${problem}</p>` : ''}
<div id="live">${renderWorkflowLive(ctx, details)}</div>`,
  });
}

/** Status, buttons, gates and the tree (the live region). */
export function renderWorkflowLive(ctx: PageContext, details: WorkflowDetails, now: Date = new Date()): Html {
  const wf = details.workflow;
  const active = wf.status === 'new' || wf.status === 'running';
  return html`<dl class="meta">
  <dt>status</dt><dd class="status s-${wf.status}" id="workflow-status">${wf.status}</dd>
  <dt>user</dt><dd>${wf.createdBy ?? ''}</dd>
  ${wf.key ? html`<dt>key</dt><dd>${wf.key}</dd>` : ''}
  ${wf.forkedFrom ? html`<dt>forked from</dt><dd id="workflow-forked-from"><a href="/workflows/${wf.forkedFrom.workflowId}">workflow ${wf.forkedFrom.workflowId}</a>${wf.forkedFrom.fromStep === null ? ' (from its start)' : html` at step ${wf.forkedFrom.fromStep}`}</dd>` : ''}
  <dt>created (UTC)</dt><dd><time datetime="${wf.createdAt}">${utc(wf.createdAt)}</time></dd>
  ${wf.startedAt ? html`<dt>started</dt><dd><time datetime="${wf.startedAt}">${utc(wf.startedAt)}</time></dd>` : ''}
  ${wf.completedAt ? html`<dt>finished</dt><dd><time datetime="${wf.completedAt}">${utc(wf.completedAt)}</time></dd>` : ''}
  ${wf.cancelledAt ? html`<dt>cancelled</dt><dd><time datetime="${wf.cancelledAt}">${utc(wf.cancelledAt)}</time></dd>` : ''}
  ${wf.durationMs !== null ? html`<dt>duration</dt><dd>${formatDuration(wf.durationMs)}${wf.status === 'running' ? ' so far' : ''}</dd>` : ''}
  <dt>steps</dt><dd>${details.steps.length} row(s)</dd>
  ${wf.usage ? html`<dt>usage</dt><dd id="workflow-usage">${describeUsage(wf.usage)}</dd>` : ''}
</dl>
${wf.error ? html`<div class="error" id="workflow-error">${formatError(wf.error)}</div>` : ''}
${folded(`wf-input-${wf.id}`, 'input', wf.input)}
${wf.status === 'completed' ? folded(`wf-output-${wf.id}`, 'output', wf.output) : ''}
${wf.error ? folded(`wf-error-${wf.id}`, 'error details', wf.error) : ''}
<div class="actions">
  ${active ? actionForm(ctx, `/workflows/${wf.id}/cancel`, 'cancel workflow', 'cancel', `Cancel workflow ${wf.id}? Its running steps are aborted.`) : ''}
  ${wf.status === 'failed' ? actionForm(ctx, `/workflows/${wf.id}/retry`, 'retry workflow', 'retry') : ''}
</div>
${wf.status !== 'new' ? forkForm(ctx, wf.id, [...new Set(details.steps.filter((s) => s.fanoutId === null).map((s) => s.name))]) : ''}
${details.waiting.length ? html`<h3>Waiting for approval</h3>${details.waiting.map((g) => gate(ctx, wf.id, g, details.steps.find((s) => s.id === g.stepId), now))}` : ''}
${details.signals.length ? html`<h3>Waiting for signals</h3>${details.signals.map((w) => signalWait(w, now))}` : ''}
${renderFlowPictureOf(details, now)}
<h3>Steps</h3>
${renderStepTree(details.steps, now)}`;
}

function gate(ctx: PageContext, workflowId: string, g: WaitingGate, row: StepView | undefined, now: Date): Html {
  const since = formatDuration(Math.max(0, now.getTime() - Date.parse(g.since)));
  const mayAct = mayApprove(g, ctx.user);
  // The executor stores the message rendered (templates resolved) in the gate row's args.
  const rendered = (row?.args as { message?: unknown } | null | undefined)?.message;
  const message = typeof rendered === 'string' ? rendered : g.message;
  const child = g.workflowId !== undefined
    ? html` <span class="muted" data-gate-workflow-id="${g.workflowId}">in sub-workflow <a href="/workflows/${g.workflowId}">${g.workflowId}</a>${g.workflowName !== undefined ? html` (${g.workflowName})` : ''}</span>`
    : '';
  return html`<section class="gate" data-gate-step-id="${g.stepId}">
  <div><strong>${g.name}</strong>${child} <span class="muted">step #${g.stepId}, waiting ${since}${g.expiresAt ? html`, expires <time datetime="${g.expiresAt}">${utc(g.expiresAt)}</time> UTC` : ''}</span></div>
  ${message ? html`<div class="message">${message}</div>` : ''}
  ${row?.error ? html`<div class="error" data-gate-refusal>${formatError(row.error)}</div>` : ''}
  ${g.approvers ? html`<div class="muted">approvers: ${g.approvers.join(', ')}</div>` : ''}
  ${mayAct ? gateForms(ctx, workflowId, g) : html`<div class="muted" data-gate-not-yours>You (${ctx.user}) may not approve or reject this gate: it waits for ${g.approvers?.join(', ') || 'nobody'}.</div>`}
</section>`;
}

/** Approve and reject, offered only to a user the gate's approvers admit; its approval.schema shown above the data field. */
function gateForms(ctx: PageContext, workflowId: string, g: WaitingGate): Html {
  const schema = g.schema !== undefined ? JSON.stringify(g.schema, null, 2) : undefined;
  return html`<div class="actions">
    ${actionForm(ctx, `/workflows/${workflowId}/steps/${g.stepId}/approve`, 'approve', 'approve')}
    <form class="inline" method="post" action="/workflows/${workflowId}/steps/${g.stepId}/reject">
      <input type="hidden" name="csrf" value="${ctx.csrf}">
      <input name="reason" placeholder="reason (optional)" aria-label="reason for rejecting">
      <button name="action" value="reject">reject</button>
    </form>
  </div>
  ${schema !== undefined ? html`<div class="schema" data-gate-schema><span class="muted">the approval data must match its approval.schema:</span><pre>${schema}</pre></div>` : ''}
  <details data-key="approve-data-${g.stepId}"${schema !== undefined ? html` open` : ''}><summary>approve with a result</summary>
    <form method="post" action="/workflows/${workflowId}/steps/${g.stepId}/approve">
      <input type="hidden" name="csrf" value="${ctx.csrf}">
      <textarea name="data" rows="3" cols="60" aria-label="the gate's result as JSON" placeholder='{"approved": true, "budget": 500}'></textarea>
      <div><button name="action" value="approve-with-data">approve with this result</button></div>
    </form>
  </details>`;
}

/** A step waiting for a signal: what it waits for and how to send it. No buttons: it is not a gate. */
function signalWait(w: WaitingSignal, now: Date): Html {
  const where = w.workflowId !== undefined ? html` in sub-workflow <a href="/workflows/${w.workflowId}">${w.workflowId}</a>` : '';
  return html`<section class="signal-wait" data-signal-step-id="${w.stepId}">
  <div><strong>${w.name}</strong> <span class="muted">step #${w.stepId}${where}</span></div>
  <div>${signalWaitText(w, now, w.expiresAt)}${w.since ? html` (<time datetime="${w.since}">${utc(w.since)}</time> UTC)` : ''}</div>
  <div class="muted">send it: <code>${w.send} --payload '{…}'</code>, or <code>INSERT INTO signals (name, key, payload) VALUES (…)</code></div>
</section>`;
}

function actionForm(ctx: PageContext, action: string, label: string, name: string, confirm?: string): Html {
  return html`<form class="inline" method="post" action="${action}"${confirm ? html` data-confirm="${confirm}"` : ''}>
  <input type="hidden" name="csrf" value="${ctx.csrf}">
  <button name="action" value="${name}">${label}</button>
</form>`;
}
