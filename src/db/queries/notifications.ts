/**
 * Statements of notifications (sql/0032, docs/operations.md "Notifications"): the outbox the
 * triggers fill, the rows a notification describes, and the single-use approval links.
 * Not re-exported by src/db/queries.ts.
 */
import type { Queryable } from './common.js';

export interface OutboxRow {
  id: string;
  kind: 'step.waiting' | 'workflow.failed';
  workflow_id: string;
  step_id: string | null;
}

/** Takes up to `limit` outbox rows, oldest first (skipping rows another notifier holds): deleted when the transaction commits. */
export async function takeOutboxRows(db: Queryable, limit: number): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow>({
    name: 'stepd_take_outbox_rows',
    text: `DELETE FROM notification_outbox WHERE id IN (SELECT id FROM notification_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING id, kind, workflow_id, step_id`,
    values: [limit],
  });
  return rows.sort((a, b) => Number(BigInt(a.id) - BigInt(b.id)));
}

export interface NotifiedWorkflow {
  id: string;
  name: string;
  status: string;
  flow: unknown;
  created_by: string | null;
  parent_id: string | null;
  error: { code?: string; message?: string; step?: string } | null;
}

export interface NotifiedStep {
  id: string;
  workflow_id: string;
  name: string;
  status: string;
  args: unknown;
  expires_at: Date | null;
  child_id: string | null;
}

export async function getNotifiedWorkflow(db: Queryable, id: string): Promise<NotifiedWorkflow | undefined> {
  const { rows } = await db.query<NotifiedWorkflow>({
    name: 'stepd_get_notified_workflow',
    text: `SELECT id, name, status, flow, created_by, parent_id, error FROM workflows WHERE id = $1`,
    values: [id],
  });
  return rows[0];
}

export async function getNotifiedStep(db: Queryable, id: string): Promise<NotifiedStep | undefined> {
  const { rows } = await db.query<NotifiedStep>({
    name: 'stepd_get_notified_step',
    text: `SELECT id, workflow_id, name, status, args, expires_at, child_id FROM workflow_steps WHERE id = $1`,
    values: [id],
  });
  return rows[0];
}

export interface NewApprovalLink {
  stepId: string;
  workflowId: string;
  action: 'approve' | 'reject';
  actAs: string;
  tokenSha256: Buffer;
  expiresInMs: number;
}

export async function insertApprovalLinks(db: Queryable, links: NewApprovalLink[]): Promise<void> {
  if (links.length === 0) return;
  await db.query({
    name: 'stepd_insert_approval_links',
    text: `INSERT INTO approval_links (step_id, workflow_id, action, act_as, token_sha256, expires_at)
           SELECT u.step_id, u.workflow_id, u.action, u.act_as, u.token, now() + u.ms * interval '1 millisecond'
             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::bigint[]) AS u(step_id, workflow_id, action, act_as, token, ms)`,
    values: [
      links.map((l) => l.stepId),
      links.map((l) => l.workflowId),
      links.map((l) => l.action),
      links.map((l) => l.actAs),
      links.map((l) => l.tokenSha256),
      links.map((l) => Math.round(l.expiresInMs)),
    ],
  });
}

export interface UsedLink {
  id: string;
  step_id: string;
  workflow_id: string;
  action: 'approve' | 'reject';
  act_as: string;
}

/**
 * Uses a link, once: the link with this token hash, for this step and action, unused and
 * unexpired, is marked used and every other link of its step burned, in one statement (all of
 * the step's links locked in id order first, so two links of a step used at once never both
 * count; the partial unique index of sql/0032 is the backstop). Returns it, or undefined.
 */
export async function useApprovalLinkOnce(db: Queryable, tokenSha256: Buffer, stepId: string, action: string): Promise<UsedLink | undefined> {
  const { rows } = await db.query<UsedLink>({
    name: 'stepd_use_approval_link_once',
    text: `WITH locked AS (
             SELECT l.id, l.used_at FROM approval_links l
              WHERE l.step_id = (SELECT step_id FROM approval_links WHERE token_sha256 = $1)
              ORDER BY l.id FOR UPDATE),
           target AS (
             SELECT l.id, l.step_id FROM approval_links l JOIN locked k ON k.id = l.id
              WHERE l.token_sha256 = $1 AND l.step_id = $2 AND l.action = $3 AND k.used_at IS NULL AND l.expires_at > now()
                AND NOT EXISTS (SELECT 1 FROM locked o WHERE o.used_at IS NOT NULL)),
           burned AS (
             UPDATE approval_links l SET used_at = now(), used = (l.id = t.id)
               FROM target t WHERE l.step_id = t.step_id AND l.used_at IS NULL
             RETURNING l.id, l.step_id, l.workflow_id, l.action, l.act_as, l.used)
           SELECT id, step_id, workflow_id, action, act_as FROM burned WHERE used`,
    values: [tokenSha256, stepId, action],
  });
  return rows[0];
}

export interface LinkState {
  step_id: string;
  action: string;
  used_at: Date | null;
  expired: boolean;
}

/** What a link whose use was refused is (for the answer): none when the token matches no link. */
export async function getApprovalLinkState(db: Queryable, tokenSha256: Buffer): Promise<LinkState | undefined> {
  const { rows } = await db.query<LinkState>({
    name: 'stepd_get_approval_link_state',
    text: `SELECT step_id, action, used_at, expires_at <= now() AS expired FROM approval_links WHERE token_sha256 = $1`,
    values: [tokenSha256],
  });
  return rows[0];
}

/** Outbox rows no notifier took within `olderThanMs`, and links expired more than a day ago: the leader's cleanup. */
export async function deleteStaleNotificationRows(db: Queryable, olderThanMs: number, limit: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'stepd_delete_stale_notification_rows',
    text: `WITH o AS (DELETE FROM notification_outbox WHERE id IN (
                       SELECT id FROM notification_outbox WHERE created_at < now() - $1::bigint * interval '1 millisecond' ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1),
                l AS (DELETE FROM approval_links WHERE id IN (
                       SELECT id FROM approval_links WHERE expires_at < now() - interval '1 day' ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1)
           SELECT (SELECT count(*) FROM o)::int + (SELECT count(*) FROM l)::int AS n`,
    values: [olderThanMs, limit],
  });
  return rows[0]?.n ?? 0;
}
