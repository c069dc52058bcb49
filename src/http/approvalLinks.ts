/**
 * The single-use approve and reject links of a gate's notification (docs/operations.md,
 * "Notifications"), served by the daemon's HTTP without a sign-in: the link's token is the
 * credential. `GET /links/:stepId/:action/:token` shows what the link would do and a button (so a
 * mail scanner fetching the link changes nothing); `POST` to the same URL uses it:
 *   - the database marks the link used and burns its siblings in one statement, only if no link
 *     of the step was used and it has not expired (useApprovalLinkOnce, sql/0032);
 *   - then the gate is approved or rejected through the operations layer as the link's user
 *     (readied_by), so the gate's approvers and approval.schema decide as for any approval, and
 *     the executor checks the approver again (src/flow/approvalCheck.ts).
 * A token that matches no link, or a link of another step or action, answers 404 and changes
 * nothing; a used one 409; an expired one 410. Only the token's SHA-256 is stored.
 */
import { createHash } from 'node:crypto';
import type { Context, Hono } from 'hono';
import type pg from 'pg';
import { OperationError, httpStatusFor } from '../api/errors.js';
import type { Operations } from '../api/operations.js';
import { getApprovalLinkState, useApprovalLinkOnce } from '../db/queries/notifications.js';
import type { Logger } from '../logger.js';
import type { HttpEnv } from './auth.js';
import { html, type Html } from './html.js';

export interface ApprovalLinkDeps {
  operations: Operations;
  pool: pg.Pool;
  log: Logger;
}

const PATH = '/links/:stepId/:action/:token';
const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const STEP_ID = /^[1-9]\d{0,18}$/;

type Status = 200 | 400 | 403 | 404 | 409 | 410 | 500;

export function mountApprovalLinks(app: Hono<HttpEnv>, deps: ApprovalLinkDeps): void {
  app.get(PATH, async (c) => {
    const link = parse(c.req.param());
    if (!link) return answer(c, 404, 'This link is not valid.');
    const problem = await refusal(deps, link);
    if (problem) return answer(c, problem.status, problem.message);
    return answer(
      c,
      200,
      `${link.action === 'approve' ? 'Approve' : 'Reject'} step ${link.stepId}?`,
      html`<form method="post"><button id="use-link">${link.action} step ${link.stepId}</button></form><p>The link works once.</p>`,
    );
  });
  app.post(PATH, async (c) => {
    const link = parse(c.req.param());
    if (!link) return answer(c, 404, 'This link is not valid.');
    const used = await useApprovalLinkOnce(deps.pool, link.hash, link.stepId, link.action);
    if (!used) {
      const problem = (await refusal(deps, link)) ?? { status: 409 as const, message: 'This link was already used.' };
      deps.log.warn({ stepId: link.stepId, action: link.action, status: problem.status }, 'approval link refused');
      return answer(c, problem.status, problem.message);
    }
    try {
      const r =
        used.action === 'approve'
          ? await deps.operations.approveStep(used.act_as, { stepId: used.step_id })
          : await deps.operations.rejectStep(used.act_as, { stepId: used.step_id, reason: 'rejected through a notification link' });
      deps.log.info({ stepId: used.step_id, workflowId: used.workflow_id, action: used.action, user: used.act_as }, 'approval link used');
      return answer(c, 200, `Step ${r.stepId} (${r.name}) of workflow ${r.workflowId} ${used.action === 'approve' ? 'approved' : 'rejected'} as ${used.act_as}.`);
    } catch (err) {
      if (!(err instanceof OperationError)) throw err;
      deps.log.warn({ stepId: used.step_id, action: used.action, code: err.code }, 'approval link used, the approval refused');
      return answer(c, (httpStatusFor(err.code) ?? 500) as Status, `The link was used, but the ${used.action === 'approve' ? 'approval' : 'rejection'} was refused: ${err.message}`);
    }
  });
}

interface ParsedLink {
  stepId: string;
  action: 'approve' | 'reject';
  hash: Buffer;
}

function parse(p: Record<string, string>): ParsedLink | undefined {
  const { stepId = '', action = '', token = '' } = p;
  if (!STEP_ID.test(stepId) || (action !== 'approve' && action !== 'reject') || !TOKEN.test(token)) return undefined;
  return { stepId, action, hash: createHash('sha256').update(token).digest() };
}

/** Why the link cannot be used (nothing said about links of other steps), or undefined. */
async function refusal(deps: ApprovalLinkDeps, link: ParsedLink): Promise<{ status: Status; message: string } | undefined> {
  const state = await getApprovalLinkState(deps.pool, link.hash);
  if (!state || String(state.step_id) !== link.stepId || state.action !== link.action) return { status: 404, message: 'This link is not valid.' };
  if (state.used_at !== null) return { status: 409, message: 'This link was already used (each approval link works once).' };
  if (state.expired) return { status: 410, message: 'This link has expired.' };
  return undefined;
}

function answer(c: Context<HttpEnv>, status: Status, message: string, extra: Html | '' = ''): Response | Promise<Response> {
  c.header('Content-Security-Policy', "default-src 'none'; form-action 'self'; frame-ancestors 'none'");
  c.header('Cache-Control', 'no-store');
  c.header('Referrer-Policy', 'no-referrer');
  const body = html`<!doctype html><html><head><meta charset="utf-8"><meta name="robots" content="noindex"><title>stepd</title></head>
<body><p id="message">${message}</p>${extra}</body></html>`;
  return c.html(body.value, status as 200);
}
