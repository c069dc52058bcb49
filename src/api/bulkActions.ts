/**
 * Bulk cancel and retry by filter, shared by `stepd cancel|retry --name …`, the MCP tools and the
 * dashboard (docs/operations.md, "Bulk operations"): the filter checked and normalized here, the
 * change one statement of the contract (src/db/queries/bulk.ts) or, with dryRun, the list of
 * what it would change. Errors are OperationErrors.
 */
import { parseDuration } from '../flow/duration.js';
import { cancelWorkflowsByFilter, listWorkflowsByFilter, redriveWorkflowsByFilter, type BulkFilter, type BulkRow } from '../db/queries/bulk.js';
import type { Queryable } from '../db/queries/common.js';
import type { WorkflowStatus } from '../db/tables.js';
import { OperationError } from './errors.js';

export type BulkAction = 'cancel' | 'retry';

export const DEFAULT_BULK_LIMIT = 1000;
export const MAX_BULK_LIMIT = 10_000;

/** The filter as callers give it: every field optional, `since` a time or a duration ago. */
export interface BulkFilterInput {
  name?: string;
  status?: string;
  user?: string;
  /** An ISO time ("2026-11-27T10:00:00Z") or a duration ago ("2h"). */
  since?: string;
  /** Only these workflow ids (the dashboard's multi-select). */
  ids?: (string | number)[];
  limit?: number;
}

export interface BulkResult {
  action: BulkAction;
  dryRun: boolean;
  /** The workflows changed (or, with dryRun, that would be), oldest first. */
  workflows: { workflowId: string; name: string; status: WorkflowStatus; createdBy: string | null; createdAt: string }[];
}

const STATUSES: Record<BulkAction, readonly WorkflowStatus[]> = { cancel: ['new', 'running'], retry: ['failed'] };

/** Checks a filter for `action`; `now` resolves a `since` given as a duration. */
export function parseBulkFilter(action: BulkAction, input: BulkFilterInput, now = new Date()): BulkFilter {
  const given = ['name', 'status', 'user', 'since', 'ids'].filter((k) => (input as Record<string, unknown>)[k] !== undefined);
  if (given.length === 0) {
    throw new OperationError('invalid_input', `give at least one filter (name, status, user or since) to ${action} workflows in bulk; nothing was changed`);
  }
  const ids = input.ids === undefined ? undefined : parseIds(input.ids);
  for (const k of ['name', 'status', 'user', 'since'] as const) {
    const v = input[k];
    if (v !== undefined && (typeof v !== 'string' || v.trim() === '')) throw new OperationError('invalid_input', `${k} must be a non-empty string (got ${JSON.stringify(v)})`);
  }
  const allowed = STATUSES[action];
  if (input.status !== undefined && !allowed.includes(input.status as WorkflowStatus)) {
    throw new OperationError('invalid_input', `status must be ${allowed.join(' or ')} to ${action} (got ${JSON.stringify(input.status)})`);
  }
  const limit = input.limit ?? DEFAULT_BULK_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_BULK_LIMIT) {
    throw new OperationError('invalid_input', `limit must be a whole number from 1 to ${MAX_BULK_LIMIT} (got ${JSON.stringify(input.limit)})`);
  }
  return {
    limit,
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.status !== undefined ? { status: input.status as WorkflowStatus } : {}),
    ...(input.user !== undefined ? { user: input.user } : {}),
    ...(input.since !== undefined ? { since: parseSince(input.since, now) } : {}),
    ...(ids !== undefined ? { ids } : {}),
  };
}

function parseIds(ids: unknown): string[] {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_BULK_LIMIT) throw new OperationError('invalid_input', `ids must be a list of 1 to ${MAX_BULK_LIMIT} workflow ids`);
  return ids.map((v) => {
    const text = String(v).trim();
    if (!/^[1-9]\d{0,18}$/.test(text)) throw new OperationError('invalid_input', `workflow ids are positive whole numbers (got ${JSON.stringify(v)})`);
    return text;
  });
}

/** "2h" (ago) or an ISO time. */
export function parseSince(text: string, now = new Date()): Date {
  if (/^\d/.test(text) && !/^\d{4}-\d{2}-\d{2}/.test(text)) {
    try {
      return new Date(now.getTime() - parseDuration(text));
    } catch {
      // not a duration: try it as a time below
    }
  }
  const at = new Date(text);
  if (Number.isNaN(at.getTime())) throw new OperationError('invalid_input', `since must be a time like 2026-11-27T10:00:00Z or a duration ago like 2h (got ${JSON.stringify(text)})`);
  return at;
}

/** Runs (or lists, with dryRun) the bulk action on the session's database role. */
export async function runBulkAction(db: Queryable, action: BulkAction, filter: BulkFilter, dryRun: boolean): Promise<BulkResult> {
  const rows = dryRun
    ? await listWorkflowsByFilter(db, action, filter)
    : action === 'cancel'
      ? await cancelWorkflowsByFilter(db, filter)
      : await redriveWorkflowsByFilter(db, filter);
  return { action, dryRun, workflows: rows.sort((a, b) => Number(BigInt(a.id) - BigInt(b.id))).map(view) };
}

function view(r: BulkRow): BulkResult['workflows'][number] {
  return { workflowId: String(r.id), name: r.name, status: r.status, createdBy: r.created_by, createdAt: new Date(r.created_at).toISOString() };
}
