/**
 * The dashboard's day-two buttons (docs/operations.md), POST forms behind the CSRF check of
 * /workflows/*, acting as the signed-in user through the operations layer:
 *   POST /workflows/:id/fork     forkWorkflow: the form's `from` (a step), `input` and `results`
 *                                (JSON objects, optional); answers 303 to the new workflow's page
 *   POST /workflows/bulk         bulkWorkflows: `action` cancel|retry over the selected `ids`
 *                                (the list's checkboxes) or the list's filters (name, status,
 *                                user, since); `dryRun=1` shows what would change with a button
 *                                that does it. The user's own workflows only, unless admin.
 * Plus the pieces the pages show: the fork form, the bulk form and its checkboxes.
 */
import type { Context, Hono } from 'hono';
import type { BulkResult } from '../../api/bulkActions.js';
import { OperationError, httpStatusFor } from '../../api/errors.js';
import type { HttpEnv } from '../auth.js';
import { html, type Html } from '../html.js';
import { page, type PageContext } from './layout.js';
import { utc } from '../../api/views/format.js';
import type { DashboardDeps } from './dashboardDeps.js';
import { pageContext, sendHtml, sendRefused } from './respond.js';

export function mountDayTwoActions(app: Hono<HttpEnv>, deps: DashboardDeps): void {
  const ops = deps.operations;
  app.post('/workflows/bulk', async (c) => {
    const form = await c.req.parseBody({ all: true });
    const ctx = pageContext(c, deps.sessions);
    const action = one(form.action);
    const ids = many(form.ids);
    const filters = Object.fromEntries((['name', 'status', 'user', 'since'] as const).flatMap((k) => (one(form[k]) ? [[k, one(form[k])!]] : [])));
    const dryRun = one(form.dryRun) === '1';
    try {
      if (action !== 'cancel' && action !== 'retry') throw new OperationError('invalid_input', 'choose cancel or retry');
      if (ids.length === 0 && Object.keys(filters).length === 0) throw new OperationError('invalid_input', 'select workflows (the boxes in the list) or filter the list first; nothing was changed');
      const r = await ops.bulkWorkflows(ctx.user, { action, dryRun, ...(ids.length ? { ids } : filters) });
      return sendHtml(c, ctx, bulkPage(ctx, r, ids, filters));
    } catch (err) {
      if (!(err instanceof OperationError)) throw err;
      return sendRefused(c, ctx, { message: err.message, status: status(err), back: { href: '/', label: 'workflows' } });
    }
  });
  app.post('/workflows/:id/fork', async (c) => {
    const form = await c.req.parseBody();
    const ctx = pageContext(c, deps.sessions);
    const workflowId = c.req.param('id') ?? '';
    try {
      const input = json(one(form.input), 'input');
      const results = json(one(form.results), 'results');
      const from = one(form.from);
      const forked = await ops.forkWorkflow(ctx.user, { workflowId, ...(from ? { fromStep: from } : {}), ...(input !== undefined ? { input } : {}), ...(results !== undefined ? { results } : {}) });
      return c.redirect(`/workflows/${encodeURIComponent(forked.workflowId)}`, 303);
    } catch (err) {
      if (!(err instanceof OperationError)) throw err;
      return sendRefused(c, ctx, { message: err.message, status: status(err), back: { href: `/workflows/${encodeURIComponent(workflowId)}`, label: `workflow ${workflowId}` } });
    }
  });
}

/** The fork form of a workflow's page: the steps it can run from (those that ran at the top level). */
export function forkForm(ctx: PageContext, workflowId: string, steps: readonly string[]): Html {
  return html`<details data-key="fork-${workflowId}"><summary>fork from a step</summary>
  <form method="post" action="/workflows/${workflowId}/fork" class="fork">
    <input type="hidden" name="csrf" value="${ctx.csrf}">
    <label>from <select name="from"><option value="">the start</option>${steps.map((s) => html`<option value="${s}">${s}</option>`)}</select></label>
    <label>input <textarea name="input" rows="2" cols="50" placeholder="(the same input)" aria-label="the fork's input as JSON"></textarea></label>
    <label>results <textarea name="results" rows="2" cols="50" placeholder='{"earlierStep": {"corrected": true}}' aria-label="replacement results of earlier steps as JSON"></textarea></label>
    <div><button name="action" value="fork">fork</button></div>
  </form>
</details>`;
}

/** The list page's bulk form; the rows' checkboxes (`bulkBox`) belong to it through form="bulk". */
export function bulkForm(ctx: PageContext, filters: { name?: string | undefined; status?: string | undefined; user?: string | undefined }): Html {
  return html`<form id="bulk" class="bulk" method="post" action="/workflows/bulk">
  <input type="hidden" name="csrf" value="${ctx.csrf}">
  <input type="hidden" name="dryRun" value="1">
  ${filters.name ? html`<input type="hidden" name="name" value="${filters.name}">` : ''}
  ${filters.status ? html`<input type="hidden" name="status" value="${filters.status}">` : ''}
  ${filters.user ? html`<input type="hidden" name="user" value="${filters.user}">` : ''}
  <span class="muted">selected (or, with none selected, every match of the filter):</span>
  <button name="action" value="cancel">cancel…</button>
  <button name="action" value="retry">retry…</button>
</form>`;
}

export function bulkBox(workflowId: string): Html {
  return html`<td><input type="checkbox" name="ids" value="${workflowId}" form="bulk" aria-label="select workflow ${workflowId}"></td>`;
}

function bulkPage(ctx: PageContext, r: BulkResult, ids: string[], filters: Record<string, string>): Html {
  const verb = r.action === 'cancel' ? 'cancelled' : 'retried';
  const list = r.workflows.length
    ? html`<table id="bulk-result"><thead><tr><th>id</th><th>name</th><th>status</th><th>user</th><th>created (UTC)</th></tr></thead><tbody>${r.workflows.map(
        (w) => html`<tr data-workflow-id="${w.workflowId}"><td class="num"><a href="/workflows/${w.workflowId}">${w.workflowId}</a></td><td>${w.name}</td><td class="status s-${w.status}">${w.status}</td><td>${w.createdBy ?? ''}</td><td>${utc(w.createdAt)}</td></tr>`,
      )}</tbody></table>`
    : html`<p class="muted">No workflow of yours matches.</p>`;
  const confirm = r.dryRun && r.workflows.length
    ? html`<form method="post" action="/workflows/bulk">
  <input type="hidden" name="csrf" value="${ctx.csrf}">
  <input type="hidden" name="action" value="${r.action}">
  ${ids.length ? r.workflows.map((w) => html`<input type="hidden" name="ids" value="${w.workflowId}">`) : Object.entries(filters).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
  <button id="bulk-confirm">${r.action} these ${r.workflows.length}</button>
</form>`
    : '';
  return page(ctx, {
    title: `${r.action} workflows`,
    // A POST's answer: the list's address in the address bar, so a reload does not post the action again.
    pageUrl: '/',
    body: html`<p><a href="/">← workflows</a></p>
<h2 id="bulk-summary">${r.dryRun ? `${r.workflows.length} workflow(s) would be ${verb}` : `${r.workflows.length} workflow(s) ${verb}`}</h2>
${list}
${confirm}`,
  });
}

function one(v: unknown): string | undefined {
  const x = Array.isArray(v) ? v[0] : v;
  return typeof x === 'string' && x.trim() !== '' ? x.trim() : undefined;
}

function many(v: unknown): string[] {
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is string => typeof x === 'string' && x.trim() !== '');
}

function json(text: string | undefined, what: string): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new OperationError('invalid_input', `the ${what} is not valid JSON: ${(err as Error).message}`);
  }
}

function status(err: OperationError): 400 | 403 | 404 | 409 | 500 | 501 | 503 {
  return (httpStatusFor(err.code) ?? 500) as 400 | 403 | 404 | 409 | 500 | 501 | 503;
}
