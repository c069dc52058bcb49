/** `stepd status ID`: a workflow and its steps as a tree (or JSON). */
import type { Command } from 'commander';
import { workflowNotFoundMessage } from '../api/errors.js';
import { getSubWorkflowTree, getWorkflow, getWorkflowSteps } from '../db/reads.js';
import { CliError, out, outJson, parseId, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { renderStatus } from '../api/views/statusText.js';
import { buildStatusViewWithChildren } from '../api/views/subWorkflowTree.js';
import { annotateGateOffers } from '../api/views/gateOffers.js';
import { callerUser } from '../api/callerUser.js';

export function registerStatus(program: Command): void {
  withDatabaseOptions(
    program
      .command('status')
      .description('show a workflow and its steps: fan-outs nested under their fork, attempts, durations, errors, waiting gates')
      .argument('<id>', 'workflow id')
      .option('--user <user>', 'who is asking: gates it may not approve are shown without the approve command (default: $STEPD_USER, else your OS user name)')
      .option('--json', 'print {workflow, steps, waiting} as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd status 7
  stepd status 7 --json | jq '.steps[] | select(.status == "failed")'`,
    )
    .action(async (idText: string, flags: DatabaseFlags & { json?: boolean; user?: string }) => {
      const id = parseId(idText, 'workflow id');
      await withDatabase(flags, async (ctx) => {
        const wf = await getWorkflow(ctx.db, id);
        if (!wf) throw new CliError(workflowNotFoundMessage(id, ctx.schema));
        const below = await getSubWorkflowTree(ctx.db, id);
        const view = buildStatusViewWithChildren({ workflow: wf, steps: await getWorkflowSteps(ctx.db, id) }, below);
        const flows = new Map(below.map((b) => [String(b.workflow.id), b.workflow.flow]));
        annotateGateOffers(view, (child) => (child === undefined ? wf.flow : flows.get(child)), callerUser(flags.user) ?? '');
        if (flags.json) outJson(view);
        else for (const line of renderStatus(view)) out(line);
      });
    });
}
