/**
 * `GET /schedules`: the cron schedules (stepd schedule add), each with its flow, the user its
 * workflows run as, its policies, the next tick, and a link to its flow's workflows. Reads
 * only: adding, removing and pausing stay with the CLI and SQL (docs/schedules.md).
 */
import type { Hono } from 'hono';
import type { ScheduleListing } from '../../api/views/scheduleView.js';
import { utc } from '../../api/views/format.js';
import type { HttpEnv } from '../auth.js';
import { html, prettyJson, type Html } from '../html.js';
import type { DashboardDeps } from './dashboardDeps.js';
import { page, type PageContext } from './layout.js';
import { pageContext, sendHtml } from './respond.js';

export function mountSchedulesPage(app: Hono<HttpEnv>, deps: DashboardDeps): void {
  app.get('/schedules', async (c) => {
    const ctx = pageContext(c, deps.sessions);
    const { schedules } = await deps.operations.listSchedules(ctx.user);
    return sendHtml(c, ctx, renderSchedulesPage(ctx, schedules));
  });
}

export function renderSchedulesPage(ctx: PageContext, schedules: ScheduleListing[]): Html {
  const body = schedules.length === 0
    ? html`<p class="muted">No schedules. Add one with <code>stepd schedule add NAME --cron EXPR --flow FLOW</code>.</p>`
    : html`<table>
<thead><tr><th>name</th><th>cron</th><th>flow</th><th>runs as</th><th>policies</th><th>next tick (UTC)</th><th>written by</th><th>input</th></tr></thead>
<tbody>${schedules.map(row)}</tbody>
</table>`;
  return page(ctx, { title: 'schedules', body: html`<h2>Schedules</h2>${body}` });
}

function row(s: ScheduleListing): Html {
  const policies = [s.overlap !== 'allow' ? `overlap ${s.overlap}` : '', s.catchUp !== 'none' ? `catch-up ${s.catchUp}` : ''].filter(Boolean).join(', ');
  return html`<tr data-schedule="${s.name}">
  <td>${s.name}</td>
  <td><code>${s.cron}</code> <span class="muted">${s.tz}</span></td>
  <td><a href="/?name=${encodeURIComponent(s.flow)}" title="the workflows of this flow">${s.flow}</a></td>
  <td>${s.user ?? html`<span class="muted">the role's own</span>`}</td>
  <td>${policies || html`<span class="muted">—</span>`}</td>
  <td>${s.paused ? html`<span class="status s-pending">paused</span>` : s.next ? html`<time datetime="${s.next}">${utc(s.next)}</time>` : html`<span class="muted">—</span>`}</td>
  <td>${s.role ?? ''}</td>
  <td><details><summary>input</summary><pre>${prettyJson(s.input)}</pre></details></td>
</tr>`;
}
