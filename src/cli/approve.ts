/** `stepd approve STEP_ID`: ready a pending step (approve or reject a gate) through the SQL contract. */
import type { Command } from 'commander';
import { stepNotFoundMessage, stepNotPendingMessage } from '../api/errors.js';
import { callerUser } from '../api/callerUser.js';
import { readyPendingStep } from '../db/contract.js';
import { getStepWithWorkflow } from '../db/reads.js';
import { CliError, out, outJson, parseId, parseJsonArg, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';

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
      const result = flags.reject ? rejection(data, flags.reason) : data;
      const by = callerUser(flags.by) ?? null;
      await withDatabase(flags, async (ctx) => {
        await refuseUnlessPending(ctx, id, flags.reject ? 'rejected' : 'approved');
        const step = await readyPendingStep(ctx.pool, { id, readiedBy: by, ...(result !== undefined ? { result } : {}) });
        // Someone else readied it (or the gate expired) between our read and our update.
        if (!step) await refuseUnlessPending(ctx, id, flags.reject ? 'rejected' : 'approved');
        if (!step) throw new CliError(`step ${id} could not be readied`);
        if (flags.json) {
          outJson({ stepId: String(step.id), workflowId: String(step.workflow_id), name: step.name, status: step.status, result: step.result, readiedBy: step.readied_by, readiedAt: step.readied_at });
        } else {
          out(`${flags.reject ? 'rejected' : 'approved'} step ${step.id} (${step.name}) of workflow ${step.workflow_id}${by ? ` as ${by}` : ''}`);
        }
      });
    });
}

function rejection(data: unknown, reason: string | undefined): Record<string, unknown> {
  const extra = typeof data === 'object' && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : data === undefined ? {} : { data };
  return { ...extra, approved: false, ...(reason !== undefined ? { reason } : {}) };
}

/** Reads the step and refuses, saying why, unless it is pending. */
async function refuseUnlessPending(ctx: ClientContext, id: string, verb: 'approved' | 'rejected'): Promise<void> {
  const step = await getStepWithWorkflow(ctx.db, id);
  if (!step) throw new CliError(stepNotFoundMessage(id, ctx.schema));
  if (step.status === 'pending') return;
  throw new CliError(stepNotPendingMessage(step, verb));
}
