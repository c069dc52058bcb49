/** `stepd list`: recent workflows, newest first. */
import type { Command } from 'commander';
import { toWorkflowSummary } from '../api/views/workflowSummary.js';
import { listWorkflows } from '../db/reads.js';
import type { WorkflowStatus } from '../db/tables.js';
import { CliError, out, outJson, parseLimit, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { between, formatDuration, formatError, formatWhen, table } from '../api/views/format.js';

const STATUSES: readonly WorkflowStatus[] = ['new', 'running', 'completed', 'failed', 'cancelled'];

export function registerList(program: Command): void {
  withDatabaseOptions(
    program
      .command('list')
      .description('list workflows, newest first')
      .option('--status <status>', `only workflows in this status (${STATUSES.join(', ')})`)
      .option('--name <name>', 'only workflows with this name')
      .option('--limit <n>', 'at most this many (default: 20)', '20')
      .option('--json', 'print a JSON array'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd list
  stepd list --status running --limit 50
  stepd list --status failed --json`,
    )
    .action(async (flags: DatabaseFlags & { status?: string; name?: string; limit: string; json?: boolean }) => {
      const limit = parseLimit(flags.limit);
      const status = flags.status as WorkflowStatus | undefined;
      if (status !== undefined && !STATUSES.includes(status)) {
        throw new CliError(`--status must be one of ${STATUSES.join(', ')} (got ${JSON.stringify(flags.status)})`);
      }
      await withDatabase(flags, async (ctx) => {
        const rows = await listWorkflows(ctx.db, { limit, ...(status ? { status } : {}), ...(flags.name ? { name: flags.name } : {}) });
        const now = new Date();
        const durationOf = (r: (typeof rows)[number]) => between(r.started_at, r.completed_at ?? r.cancelled_at ?? (r.status === 'running' ? now : null));
        if (flags.json) {
          outJson(rows.map((r) => toWorkflowSummary(r, now)));
          return;
        }
        if (rows.length === 0) {
          out(status ? `no ${status} workflows` : 'no workflows yet (start one with: stepd run FLOW.json)');
          return;
        }
        const lines = table([
          ['ID', 'STATUS', 'NAME', 'USER', 'CREATED', 'TOOK', 'STEPS', 'NOTE'],
          ...rows.map((r) => {
            const d = durationOf(r);
            const note = r.waiting > 0 ? `${r.waiting} gate(s) waiting (stepd status ${r.id})` : r.status === 'failed' ? formatError(r.error) : '';
            const origin = [r.parent_id === null ? '' : `sub-workflow of ${r.parent_id}`, r.forked_from ? `fork of ${r.forked_from}` : ''].filter((s) => s !== '').join('; ');
            const noteText = [origin, note].filter((s) => s !== '').join('; ');
            return [String(r.id), r.status, r.name, r.created_by ?? '-', formatWhen(r.created_at, now), d === undefined ? '-' : formatDuration(d), String(r.step_count), noteText];
          }),
        ]);
        for (const line of lines) out(line);
      });
    });
}
