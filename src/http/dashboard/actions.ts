/**
 * The dashboard's buttons, each a POST form that writes the SQL contract through the operations
 * layer as the signed-in user:
 *   POST /workflows/:id/steps/:stepId/approve     approveStep (readied_by = the user), with the form's
 *                                                 optional `data` (JSON) as the gate's result
 *   POST /workflows/:id/steps/:stepId/reject      rejectStep, with the form's `reason`
 *   POST /workflows/:id/cancel                    cancelWorkflow
 *   POST /workflows/:id/retry                     retryWorkflow
 * Success answers 303 to the workflow's page; a refusal renders that page again with the
 * operation's message (the CLI's wording) and its HTTP status, the page's own address in the
 * address bar (layout.ts, pageUrl), so a reload does not post the form again.
 */
import type { Context, Hono } from 'hono';
import { OperationError, httpStatusFor } from '../../api/errors.js';
import type { HttpEnv } from '../auth.js';
import type { DashboardDeps } from './dashboardDeps.js';
import { pageContext, sendHtml, sendRefused } from './respond.js';
import { renderWorkflowPage } from './workflowPage.js';
import { withFlow } from './withFlow.js';

type Action = (user: string, form: Record<string, unknown>, c: Context<HttpEnv>) => Promise<unknown>;

export function mountActions(app: Hono<HttpEnv>, deps: DashboardDeps): void {
  const ops = deps.operations;
  const route = (path: string, action: Action) => {
    app.post(path, async (c) => {
      const form = await c.req.parseBody();
      const workflowId = c.req.param('id') ?? '';
      try {
        await action(c.get('user'), form, c);
      } catch (err) {
        if (!(err instanceof OperationError)) throw err;
        return refused(c, deps, workflowId, err);
      }
      return c.redirect(`/workflows/${encodeURIComponent(workflowId)}`, 303);
    });
  };
  route('/workflows/:id/steps/:stepId/approve', (user, form, c) => {
    const data = parseData(form.data);
    return ops.approveStep(user, { stepId: c.req.param('stepId') ?? '', ...(data !== undefined ? { data } : {}) });
  });
  route('/workflows/:id/steps/:stepId/reject', (user, form, c) => {
    const reason = typeof form.reason === 'string' && form.reason.trim() ? form.reason.trim() : undefined;
    return ops.rejectStep(user, { stepId: c.req.param('stepId') ?? '', ...(reason !== undefined ? { reason } : {}) });
  });
  route('/workflows/:id/cancel', (user, _form, c) => ops.cancelWorkflow(user, { workflowId: c.req.param('id') ?? '' }));
  route('/workflows/:id/retry', (user, _form, c) => ops.retryWorkflow(user, { workflowId: c.req.param('id') ?? '' }));
}

async function refused(c: Context<HttpEnv>, deps: DashboardDeps, workflowId: string, err: OperationError): Promise<Response> {
  const ctx = pageContext(c, deps.sessions);
  const status = (httpStatusFor(err.code) ?? 500) as 400 | 403 | 404 | 409 | 500 | 501 | 503;
  try {
    const details = await deps.operations.getWorkflow(ctx.user, { workflowId });
    return sendHtml(c, ctx, renderWorkflowPage(ctx, await withFlow(deps.db, details), err.message), status);
  } catch {
    return sendRefused(c, ctx, { message: err.message, status, back: { href: '/', label: 'workflows' } });
  }
}

/** The optional JSON result of an approval (the form's `data`); empty means the default `{"approved": true}`. */
function parseData(field: unknown): unknown {
  if (typeof field !== 'string' || !field.trim()) return undefined;
  try {
    return JSON.parse(field) as unknown;
  } catch (err) {
    throw new OperationError('invalid_input', `the result is not valid JSON: ${(err as Error).message}`);
  }
}
