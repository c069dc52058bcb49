/** `stepd watch [ID]`: stream lifecycle events from channel stepd_events. */
import type { Command } from 'commander';
import { getWorkflow } from '../db/reads.js';
import { CliError, note, parseId, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { Follower } from './follow.js';

export function registerWatch(program: Command): void {
  withDatabaseOptions(
    program
      .command('watch')
      .description('stream lifecycle events; with an ID, follow that workflow until it ends and exit with its outcome')
      .argument('[id]', 'workflow id (default: every workflow of the schema, until Ctrl-C)')
      .option('--json', 'print one JSON event per line'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd watch                 # everything, until Ctrl-C
  stepd watch 7               # one workflow; exit 0 completed, 2 failed, 3 cancelled
  stepd watch --json | jq -c 'select(.type == "step.failed")'

Events are NOTIFYed on the PostgreSQL channel stepd_events; see README "Events" for the payload.
Any database role may NOTIFY, so an event is shown (and ends the watch) only once the rows confirm
it, and what is shown comes from the rows.`,
    )
    .action(async (idText: string | undefined, flags: DatabaseFlags & { json?: boolean }) => {
      const id = idText === undefined ? undefined : parseId(idText, 'workflow id');
      process.exitCode = await withDatabase(flags, async (ctx) => {
        if (id !== undefined && !(await getWorkflow(ctx.db, id))) {
          throw new CliError(`workflow ${id} does not exist in schema "${ctx.schema}" (list them with: stepd list)`);
        }
        const follower = new Follower(ctx, { json: flags.json === true });
        await follower.listen();
        if (id !== undefined) return follower.follow(id);
        note(`stepd: watching schema ${ctx.schema} (Ctrl-C to stop)`);
        return follower.watchAll();
      });
    });
}
