/** `stepd cancel ID`: cancel a workflow through the SQL contract. */
import type { Command } from 'commander';
import { workflowNotActiveMessage, workflowNotFoundMessage } from '../api/errors.js';
import { cancelWorkflowIfActive } from '../db/contract.js';
import { getWorkflow } from '../db/reads.js';
import { hasBulkFilter, runBulkFromCli, withBulkOptions, type BulkFlags } from './bulkFlags.js';
import { CliError, EXIT, out, outJson, parseId, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';

export function registerCancel(program: Command): void {
  withDatabaseOptions(
    withBulkOptions(
      program
        .command('cancel')
        .description('cancel a workflow that is new or running; its live steps are cancelled and running tools aborted')
        .argument('[id]', 'workflow id (or filter options instead: --name, --status, --user, --since)')
        .option('--json', 'print the cancelled workflow(s) as JSON'),
      'cancel',
    ),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd cancel 7
  stepd cancel --name nightly --dry-run      # list the new and running "nightly" workflows
  stepd cancel --name nightly --since 2h     # cancel those created in the last two hours

The same as:  UPDATE stepd.workflows SET status = 'cancelled' WHERE id = 7;
By filter, one statement over the top-level workflows your role started (all, for a trusted role).
A workflow that already ended is refused with exit code 1.`,
    )
    .action(async (idText: string | undefined, flags: BulkFlags) => {
      if (idText !== undefined && hasBulkFilter(flags)) throw new CliError('give a workflow id or filter options, not both', EXIT.invalid);
      if (idText === undefined) {
        if (!hasBulkFilter(flags)) throw new CliError('give a workflow id, or filter options (--name, --status, --user, --since) to cancel many', EXIT.invalid);
        return runBulkFromCli('cancel', flags);
      }
      const id = parseId(idText, 'workflow id');
      await withDatabase(flags, async (ctx) => {
        await refuseUnlessActive(ctx, id);
        const wf = (await cancelWorkflowIfActive(ctx.pool, id)) ?? (await refuseUnlessActive(ctx, id));
        if (!wf) throw new CliError(`workflow ${id} could not be cancelled`);
        if (flags.json) outJson({ id: String(wf.id), name: wf.name, status: wf.status, cancelledAt: wf.cancelled_at });
        else out(`cancelled workflow ${wf.id} (${wf.name})`);
      });
    });
}

/** Reads the workflow and refuses, saying why, unless it can still be cancelled. */
async function refuseUnlessActive(ctx: ClientContext, id: string): Promise<undefined> {
  const wf = await getWorkflow(ctx.db, id);
  if (!wf) throw new CliError(workflowNotFoundMessage(id, ctx.schema));
  if (wf.status === 'new' || wf.status === 'running') return undefined;
  throw new CliError(workflowNotActiveMessage(wf));
}
