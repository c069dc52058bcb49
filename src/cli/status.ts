/** `stepd status ID`: a workflow and its steps as a tree (or JSON). */
import type { Command } from 'commander';
import { workflowNotFoundMessage } from '../api/errors.js';
import { getSubWorkflowTree, getWorkflow, getWorkflowSteps } from '../db/reads.js';
import { CliError, out, outJson, parseId, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { renderStatus } from './statusView.js';
import { buildStatusViewWithChildren } from './subWorkflowTree.js';

export function registerStatus(program: Command): void {
  withDatabaseOptions(
    program
      .command('status')
      .description('show a workflow and its steps: fan-outs nested under their fork, attempts, durations, errors, waiting gates')
      .argument('<id>', 'workflow id')
      .option('--json', 'print {workflow, steps, waiting} as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd status 7
  stepd status 7 --json | jq '.steps[] | select(.status == "failed")'`,
    )
    .action(async (idText: string, flags: DatabaseFlags & { json?: boolean }) => {
      const id = parseId(idText, 'workflow id');
      await withDatabase(flags, async (ctx) => {
        const wf = await getWorkflow(ctx.db, id);
        if (!wf) throw new CliError(workflowNotFoundMessage(id, ctx.schema));
        const view = buildStatusViewWithChildren({ workflow: wf, steps: await getWorkflowSteps(ctx.db, id) }, await getSubWorkflowTree(ctx.db, id));
        if (flags.json) outJson(view);
        else for (const line of renderStatus(view)) out(line);
      });
    });
}
