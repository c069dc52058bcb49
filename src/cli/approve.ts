/**
 * `stepd approve STEP_ID`: ready a pending step (approve or reject a gate) through the SQL
 * contract, by the same operation the MCP tools and the dashboard use (src/api/operations.ts):
 * the same refusals, and a gate's `approval.approvers` apply.
 */
import type { Command } from 'commander';
import { callerUser } from '../api/callerUser.js';
import { Operations } from '../api/operations.js';
import { CliError, out, outJson, parseId, parseJsonArg, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';

interface ApproveFlags extends DatabaseFlags {
  data?: string;
  reject?: boolean;
  reason?: string;
  by?: string;
  json?: boolean;
}

export function registerApprove(program: Command): void {
  withDatabaseOptions(
    program
      .command('approve')
      .description('approve (or with --reject, reject) a gate that is waiting: readies the pending step')
      .argument('<step-id>', 'the id of the pending step (shown by `stepd status` and `run --follow`)')
      .option('--data <json>', "the gate's result, any JSON (default: {\"approved\": true}); also reports an external task's result")
      .option('--reject', 'reject the gate: its result is {"approved": false, "reason": …} and it fails with code "rejected"')
      .option('--reason <text>', 'why it was rejected (with --reject)')
      .option('--by <user>', 'who approves, recorded in readied_by. Default: $STEPD_USER, else your OS user name (as run --user)')
      .option('--json', 'print the updated step as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd approve 42
  stepd approve 42 --data '{"approved": true, "budget": 500}' --by james
  stepd approve 42 --reject --reason "too costly"

The same as:  UPDATE stepd.workflow_steps SET status = 'ready', result = …, readied_by = …
                WHERE id = 42 AND status = 'pending';
Only a pending step can be approved; anything else is refused with exit code 1.`,
    )
    .action(async (idText: string, flags: ApproveFlags) => {
      const id = parseId(idText, 'step id');
      if (flags.reason !== undefined && !flags.reject) throw new CliError('--reason goes with --reject');
      const data = flags.data === undefined ? undefined : parseJsonArg(flags.data, '--data');
      const by = callerUser(flags.by);
      if (!by) throw new CliError('no user: pass --by USER (or set STEPD_USER)');
      await withDatabase(flags, async (ctx) => {
        const ops = new Operations({ pool: ctx.pool, db: ctx.db, schema: ctx.schema });
        const step = flags.reject
          ? await ops.rejectStep(by, { stepId: id, data, ...(flags.reason !== undefined ? { reason: flags.reason } : {}) })
          : await ops.approveStep(by, { stepId: id, data });
        if (flags.json) outJson(step);
        else out(`${flags.reject ? 'rejected' : 'approved'} step ${step.stepId} (${step.name}) of workflow ${step.workflowId} as ${by}`);
      });
    });
}
