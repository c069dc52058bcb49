/**
 * The filter options `stepd cancel` and `stepd retry` take to act on many workflows at once
 * (src/api/bulkActions.ts), and the run that prints what changed or, with --dry-run, would.
 */
import type { Command } from 'commander';
import { parseBulkFilter, runBulkAction, type BulkAction } from '../api/bulkActions.js';
import { OperationError } from '../api/errors.js';
import { CliError, EXIT, out, outJson, withDatabase, type DatabaseFlags } from './common.js';

export interface BulkFlags extends DatabaseFlags {
  name?: string;
  status?: string;
  user?: string;
  since?: string;
  limit?: string;
  dryRun?: boolean;
  json?: boolean;
}

export function withBulkOptions(cmd: Command, action: BulkAction): Command {
  const statuses = action === 'cancel' ? 'new or running' : 'failed';
  return cmd
    .option('--name <name>', `${action} every ${statuses} workflow of this name`)
    .option('--status <status>', `only workflows in this status (${statuses})`)
    .option('--user <user>', 'only workflows run as this user (created_by)')
    .option('--since <time>', 'only workflows created since this time (2026-11-27T10:00:00Z) or this long ago (2h)')
    .option('--limit <n>', 'at most this many workflows, oldest first (default 1000)')
    .option('--dry-run', `list the workflows that would be ${action === 'cancel' ? 'cancelled' : 'retried'}, change nothing`);
}

export function hasBulkFilter(flags: BulkFlags): boolean {
  return flags.name !== undefined || flags.status !== undefined || flags.user !== undefined || flags.since !== undefined || flags.dryRun === true;
}

export async function runBulkFromCli(action: BulkAction, flags: BulkFlags): Promise<void> {
  let filter;
  try {
    const limit = flags.limit === undefined ? undefined : Number(flags.limit);
    filter = parseBulkFilter(action, { ...pick(flags), ...(limit !== undefined ? { limit } : {}) });
  } catch (err) {
    throw new CliError(err instanceof OperationError ? err.message : String(err), EXIT.invalid);
  }
  await withDatabase(flags, async (ctx) => {
    const r = await runBulkAction(ctx.pool, action, filter, flags.dryRun === true);
    if (flags.json) return outJson(r);
    const verb = action === 'cancel' ? 'cancelled' : 'retried (redrive requested)';
    for (const w of r.workflows) out(`${r.dryRun ? 'would be ' : ''}${verb}: workflow ${w.workflowId} (${w.name}, ${r.dryRun ? w.status + ', ' : ''}user ${w.createdBy ?? '-'})`);
    out(r.dryRun ? `dry run: ${r.workflows.length} workflow(s) would be ${verb}; nothing was changed` : `${r.workflows.length} workflow(s) ${verb}`);
  });
}

function pick(flags: BulkFlags) {
  return {
    ...(flags.name !== undefined ? { name: flags.name } : {}),
    ...(flags.status !== undefined ? { status: flags.status } : {}),
    ...(flags.user !== undefined ? { user: flags.user } : {}),
    ...(flags.since !== undefined ? { since: flags.since } : {}),
  };
}
