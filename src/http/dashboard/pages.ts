/**
 * The dashboard's pages: `GET /` (the workflows list with its filters) and
 * `GET /workflows/:id` (one workflow). Reads only.
 */
import type { Hono } from 'hono';
import { OperationError } from '../../api/errors.js';
import { toOperationError, type WorkflowDetails } from '../../api/operations.js';
import { toWorkflowSummary } from '../../api/views/workflowSummary.js';
import { listWorkflows } from '../../db/reads.js';
import { nestSubWorkflows } from './nestSubWorkflows.js';
import type { WorkflowStatus } from '../../db/tables.js';
import type { HttpEnv } from '../auth.js';
import { html } from '../html.js';
import { page } from './layout.js';
import { LIST_STATUSES, renderListLive, renderListPage, type ListFilters } from './listPage.js';
import { isFragmentRequest, pageContext, sendHtml } from './respond.js';
import { renderWorkflowLive, renderWorkflowPage } from './workflowPage.js';
import { withFlow } from './withFlow.js';
import type { DashboardDeps } from './dashboardDeps.js';

const DEFAULT_LIMIT = 50;
/** Sub-workflows shown under the listed workflows, at most (the newest). */
const SUB_WORKFLOW_LIMIT = 500;

export function mountPages(app: Hono<HttpEnv>, deps: DashboardDeps): void {
  app.get('/', async (c) => {
    const ctx = pageContext(c, deps.sessions);
    const { filters, problems } = parseFilters(c.req.query());
    // Top-level workflows match the filters; each one's sub-workflows are nested under it.
    const rows = await listWorkflows(deps.db, {
      topLevel: true,
      limit: filters.limit,
      ...(filters.status ? { status: filters.status } : {}),
      ...(filters.name ? { name: filters.name } : {}),
      ...(filters.user ? { createdBy: filters.user } : {}),
      ...(filters.since ? { createdAfter: utcInstant(filters.since)! } : {}),
      ...(filters.until ? { createdBefore: utcInstant(filters.until)! } : {}),
    }).catch((err: unknown) => {
      throw toOperationError(err);
    });
    const below = rows.length ? await listWorkflows(deps.db, { rootIds: rows.map((r) => String(r.id)), limit: SUB_WORKFLOW_LIMIT }).catch((err: unknown) => {
      throw toOperationError(err);
    }) : [];
    const now = new Date();
    const views = nestSubWorkflows(rows.map((r) => toWorkflowSummary(r, now)), below.map((r) => toWorkflowSummary(r, now)));
    const capacity = deps.capacity ? await deps.capacity().catch(() => undefined) : undefined;
    if (isFragmentRequest(c)) return sendHtml(c, ctx, renderListLive(filters, views, capacity));
    return sendHtml(c, ctx, renderListPage(ctx, filters, views, problems.join('; ') || undefined, capacity), problems.length ? 400 : 200);
  });

  app.get('/workflows/:id', async (c) => {
    const ctx = pageContext(c, deps.sessions);
    let details: WorkflowDetails;
    try {
      details = await deps.operations.getWorkflow(ctx.user, { workflowId: c.req.param('id') });
      details = await withFlow(deps.db, details);
    } catch (err) {
      if (!(err instanceof OperationError) || (err.code !== 'not_found' && err.code !== 'invalid_input')) throw err;
      const status = err.code === 'not_found' ? 404 : 400;
      return sendHtml(c, ctx, page(ctx, { title: 'not found', body: html`<p><a href="/">← workflows</a></p><p class="flash" role="alert">${err.message}</p>` }), status);
    }
    if (isFragmentRequest(c)) return sendHtml(c, ctx, renderWorkflowLive(ctx, details));
    return sendHtml(c, ctx, renderWorkflowPage(ctx, details));
  });
}

/** The list's query string, checked; a bad value is dropped and named in `problems`. */
export function parseFilters(query: Record<string, string>): { filters: ListFilters; problems: string[] } {
  const problems: string[] = [];
  const filters: ListFilters = { limit: DEFAULT_LIMIT };
  const text = (k: string) => (query[k] ?? '').trim();
  if (text('status')) {
    if ((LIST_STATUSES as readonly string[]).includes(text('status'))) filters.status = text('status') as WorkflowStatus;
    else problems.push(`status must be one of ${LIST_STATUSES.join(', ')}`);
  }
  if (text('name')) filters.name = text('name');
  if (text('user')) filters.user = text('user');
  for (const k of ['since', 'until'] as const) {
    if (!text(k)) continue;
    if (utcInstant(text(k))) filters[k] = text(k);
    else problems.push(`${k} must be a date and time like 2026-11-25T10:30 (UTC)`);
  }
  if (text('limit')) {
    const n = Number(text('limit'));
    if (Number.isInteger(n) && n >= 1 && n <= 1000) filters.limit = n;
    else problems.push('limit must be a whole number from 1 to 1000');
  }
  return { filters, problems };
}

/** `2026-11-25T10:30[:00]` read as UTC (a trailing Z or offset is honoured); undefined when it is not a time. */
export function utcInstant(text: string): Date | undefined {
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:\d{2})?$/.test(text)) return undefined;
  const withZone = /(Z|[+-]\d{2}:\d{2})$/.test(text) ? text : text.includes('T') ? `${text}Z` : `${text}T00:00Z`;
  const d = new Date(withZone);
  return Number.isNaN(d.getTime()) ? undefined : d;
}
