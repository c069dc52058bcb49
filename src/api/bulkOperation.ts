/**
 * Bulk cancel and retry as a user (the MCP tools cancel_workflows / retry_workflows, the
 * dashboard's multi-select): the filter of bulkActions.ts, narrowed to the user's own workflows
 * (created_by) unless the user is an admin (config api.admins), as cancel and retry are one by
 * one. The daemon's role is trusted, so this narrowing is what keeps users apart.
 */
import type pg from 'pg';
import { parseBulkFilter, runBulkAction, type BulkAction, type BulkFilterInput, type BulkResult } from './bulkActions.js';
import { OperationError } from './errors.js';

export interface BulkInput extends BulkFilterInput {
  action: BulkAction;
  dryRun?: boolean;
}

export async function bulkAsUser(deps: { pool: pg.Pool; admins?: readonly string[] }, user: string, args: BulkInput): Promise<BulkResult> {
  if (args.action !== 'cancel' && args.action !== 'retry') throw new OperationError('invalid_input', `action must be cancel or retry (got ${JSON.stringify(args.action)})`);
  const admin = (deps.admins ?? []).includes(user);
  if (!admin && args.user !== undefined && args.user !== user) {
    throw new OperationError('permission_denied', `user "${user}" may ${args.action} only its own workflows (user "${user}"), not those of user ${JSON.stringify(args.user)}; only an admin (config api.admins) may`, {
      details: { user, asked: args.user },
    });
  }
  const { action, dryRun, ...filterInput } = args;
  const filter = parseBulkFilter(action, filterInput);
  return runBulkAction(deps.pool, action, admin ? filter : { ...filter, user }, dryRun === true);
}
