/**
 * The workflows list: a filter form (status, name, user, created between two instants in UTC)
 * and a table, newest first. The table is the page's live region: it is rendered again (as a
 * fragment) when an event arrives.
 */
import type { CapacityGauges } from '../../db/queries/capacity.js';
import { capacityPanel } from './capacityPanel.js';
import type { WorkflowSummaryView } from '../../api/views/workflowSummary.js';
import type { NestedRow } from './nestSubWorkflows.js';
import { formatDuration, formatError, utc } from '../../api/views/format.js';
import type { WorkflowStatus } from '../../db/tables.js';
import { html, type Html } from '../html.js';
import { page, type PageContext } from './layout.js';
import { bulkBox, bulkForm } from './dayTwoActions.js';

export const LIST_STATUSES: readonly WorkflowStatus[] = ['new', 'running', 'completed', 'failed', 'cancelled'];

export interface ListFilters {
  status?: WorkflowStatus;
  name?: string;
  user?: string;
  /** `YYYY-MM-DDTHH:MM` in UTC, as the form sends it. */
  since?: string;
  until?: string;
  limit: number;
}

export function renderListPage(ctx: PageContext, filters: ListFilters, rows: WorkflowSummaryView[], problem?: string, capacity?: CapacityGauges): Html {
  return page(ctx, {
    title: 'workflows',
    events: '/events',
    body: html`<h2>Workflows</h2>
${filterForm(filters)}
${problem ? html`<p class="flash" role="alert">${problem}</p>` : ''}
${bulkForm(ctx, filters)}
<div id="live">${renderListLive(filters, rows, capacity)}</div>`,
  });
}

/** The table alone (the live region). */
export function renderListLive(filters: ListFilters, rows: WorkflowSummaryView[], capacity?: CapacityGauges): Html {
  if (rows.length === 0) return html`${capacityPanel(capacity)}<p class="muted" id="empty">No workflows match.</p>`;
  return html`${capacityPanel(capacity)}<table id="workflows">
<thead><tr><th><span class="muted" title="select for cancel / retry">sel</span></th><th>id</th><th>name</th><th>status</th><th>user</th><th>created (UTC)</th><th>duration</th><th>steps</th><th>waiting</th><th>error</th></tr></thead>
<tbody>${rows.map(row)}</tbody>
</table>
${rows.filter((r) => !('depth' in r) || r.depth === 0).length >= filters.limit ? html`<p class="muted">Showing the newest ${filters.limit}; narrow the filters or <a href="${moreHref(filters)}">show more</a>.</p>` : ''}`;
}

function row(w: WorkflowSummaryView | NestedRow): Html {
  const depth = 'depth' in w ? w.depth : 0;
  return html`<tr data-workflow-id="${w.id}" data-status="${w.status}"${depth > 0 ? html` class="sub" data-parent-id="${w.parentId ?? ''}" data-depth="${String(depth)}"` : ''}>
  ${depth > 0 ? html`<td></td>` : bulkBox(w.id)}
  <td class="num"><a href="/workflows/${w.id}">${w.id}</a></td>
  <td${depth > 0 ? html` class="d${String(Math.min(depth, 3))}"` : ''}>${depth > 0 ? html`<span class="muted" title="sub-workflow of ${w.parentId ?? ''}">↳ </span>` : ''}<a href="/workflows/${w.id}">${w.name}</a>${w.key ? html` <span class="muted">key ${w.key}</span>` : ''}</td>
  <td class="status s-${w.status}">${w.status}</td>
  <td>${w.createdBy ?? ''}</td>
  <td><time datetime="${w.createdAt}">${utc(w.createdAt)}</time></td>
  <td class="num">${w.durationMs === null ? '' : formatDuration(w.durationMs)}</td>
  <td class="num">${w.steps}</td>
  <td class="num">${w.waiting > 0 ? html`<strong class="s-pending">${w.waiting}</strong>` : ''}</td>
  <td class="error">${w.error ? cut(formatError(w.error), 160) : ''}</td>
</tr>`;
}

function filterForm(f: ListFilters): Html {
  return html`<form class="filters" method="get" action="/">
  <label>status <select name="status">
    <option value="">any</option>
    ${LIST_STATUSES.map((s) => html`<option value="${s}"${s === f.status ? html` selected` : ''}>${s}</option>`)}
  </select></label>
  <label>name <input name="name" value="${f.name ?? ''}" placeholder="exact name"></label>
  <label>user <input name="user" value="${f.user ?? ''}" placeholder="created by"></label>
  <label>created from (UTC) <input type="datetime-local" name="since" value="${f.since ?? ''}"></label>
  <label>until (UTC) <input type="datetime-local" name="until" value="${f.until ?? ''}"></label>
  <button>filter</button> <a href="/">clear</a>
</form>`;
}

function moreHref(f: ListFilters): string {
  const q = new URLSearchParams();
  if (f.status) q.set('status', f.status);
  if (f.name) q.set('name', f.name);
  if (f.user) q.set('user', f.user);
  if (f.since) q.set('since', f.since);
  if (f.until) q.set('until', f.until);
  q.set('limit', String(Math.min(1000, f.limit * 4)));
  return `/?${q.toString()}`;
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
