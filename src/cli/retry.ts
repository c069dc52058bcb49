/** `stepd retry ID`: redrive a failed workflow through the SQL contract, optionally following it. */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { cannotRedriveMessage, workflowNotFailedMessage, workflowNotFoundMessage } from '../api/errors.js';
import { loadConfigSection } from '../configSection.js';
import { redriveWorkflowIfFailed } from '../db/contract.js';
import { getWorkflow, getWorkflowSteps } from '../db/reads.js';
import type { WorkflowRow } from '../db/tables.js';
import type { ErrorData } from '../errors.js';
import { checkRedrive } from '../executor/transitions/redriveCheck.js';
import { resolveCaps, type Caps } from '../flow/caps.js';
import { compileFlow } from '../flow/validate.js';
import { CliError, EXIT, errorMessage, out, outJson, parseId, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';
import { Follower } from './follow.js';
import { hasBulkFilter, runBulkFromCli, withBulkOptions, type BulkFlags } from './bulkFlags.js';
import { formatError } from '../api/views/format.js';

interface RetryFlags extends BulkFlags {
  follow?: boolean;
  wait?: boolean;
  json?: boolean;
  config?: string;
}

const WAIT_POLL_MS = 200;

export function registerRetry(program: Command): void {
  withDatabaseOptions(
    withBulkOptions(
    program
      .command('retry')
      .description('redrive a failed workflow: its failed steps get new attempts, done steps keep their results, and it goes on from there')
      .argument('[id]', 'workflow id (or filter options instead: --name, --user, --since)')
      .option('-f, --follow', 'then print each step until the workflow ends; exit 0 completed, 2 failed (or refused), 3 cancelled')
      .option('--wait', 'wait until a daemon took the request (as long as it takes; Ctrl-C to stop) and say whether it resumed or refused it; exit 0 resumed, 2 refused')
      .option('--config <path>', "the daemon's config file, for its caps (default: ./stepd.config.json if present)")
      .option('--json', 'print JSON (with --follow: one event per line)'),
    'retry',
    ),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd retry 7                 # request the redrive; the daemon picks it up
  stepd retry 7 --follow        # and follow the workflow to its end
  stepd retry 7 --wait --json   # wait for the daemon's decision: resumed or refused
  stepd retry --name nightly --since 1d --dry-run   # list the failed "nightly" workflows of the last day
  stepd retry --name nightly --since 1d             # redrive them (one statement)

The same as:  UPDATE stepd.workflows SET status = 'running' WHERE id = 7 AND status = 'failed';
Refused with the reason (exit 1, nothing written) when the workflow is not failed, failed
before it was admitted, its flow is invalid under today's caps, or its failure left nothing to
run again. The daemon checks again and may still refuse: the workflow is then failed again with
code redrive_refused (the reason in error.details.reason, the original error in error.details.error).`,
    )
    .action(async (idText: string | undefined, flags: RetryFlags) => {
      if (idText !== undefined && hasBulkFilter(flags)) throw new CliError('give a workflow id or filter options, not both', EXIT.invalid);
      if (idText === undefined) {
        if (!hasBulkFilter(flags)) throw new CliError('give a workflow id, or filter options (--name, --user, --since) to retry many', EXIT.invalid);
        return runBulkFromCli('retry', flags);
      }
      const id = parseId(idText, 'workflow id');
      const caps = await capsFrom(flags.config);
      process.exitCode = await withDatabase(flags, async (ctx) => {
        const wf = await refuseUnlessRedrivable(ctx, id, caps);
        const follower = flags.follow ? new Follower(ctx, { json: flags.json === true }) : undefined;
        await follower?.listen();
        try {
          const requested = await redriveWorkflowIfFailed(ctx.pool, id);
          if (!requested) {
            await refuseUnlessRedrivable(ctx, id, caps);
            throw new CliError(`workflow ${id} could not be redriven`);
          }
          const row = { id, name: wf.name, status: requested.status, redriveRequestedAt: requested.redrive_requested_at };
          if (follower) {
            // As run --follow: the row first (JSON), then the events to the end.
            if (flags.json) outJson(row);
            else out(`redriving workflow ${id} (${wf.name})`);
            return await follower.follow(id);
          }
          if (!flags.wait) {
            if (flags.json) outJson(row);
            else out(`redrive of workflow ${id} (${wf.name}) requested; the daemon picks it up\n  follow it:  stepd watch ${id}\n  status:     stepd status ${id}`);
            return EXIT.ok;
          }
          return await waitForDecision(ctx, id, flags.json === true);
        } finally {
          await follower?.close();
        }
      });
    });
}

/** The caps the daemon validates with: those of --config, or of ./stepd.config.json, else the built-in ones. */
async function capsFrom(path: string | undefined): Promise<Readonly<Caps>> {
  const file = path ?? (existsSync('stepd.config.json') ? 'stepd.config.json' : undefined);
  if (file === undefined) return resolveCaps();
  try {
    return resolveCaps(await loadConfigSection(file, 'caps'));
  } catch (err) {
    throw new CliError(`cannot read the caps of ${file}: ${errorMessage(err)}`);
  }
}

/** Reads the workflow and its steps and refuses, saying why, unless a redrive can go on. */
async function refuseUnlessRedrivable(ctx: ClientContext, id: string, caps: Readonly<Caps>): Promise<WorkflowRow> {
  const wf = await getWorkflow(ctx.db, id);
  if (!wf) throw new CliError(workflowNotFoundMessage(id, ctx.schema));
  if (wf.status !== 'failed') throw new CliError(workflowNotFailedMessage(wf));
  const steps = await getWorkflowSteps(ctx.db, id);
  const check = checkRedrive(wf, steps, (flow) => compileFlow(flow, { caps }));
  if (!check.ok) throw new CliError(cannotRedriveMessage(wf, check.message, check.issues));
  return wf;
}

/** Waits until the daemon handled the request; reports whether it resumed the workflow or refused. */
async function waitForDecision(ctx: ClientContext, id: string, json: boolean): Promise<number> {
  for (;;) {
    const wf = await getWorkflow(ctx.db, id);
    if (!wf) throw new CliError(`workflow ${id} was deleted while waiting for its redrive`);
    if (wf.redrive_requested_at === null) {
      const error = wf.error as ErrorData | null;
      const refused = wf.status === 'failed' && (error?.code === 'redrive_refused' || error?.code === 'redrive_failed');
      if (json) outJson({ id, name: wf.name, status: wf.status, redrives: wf.redrives, outcome: refused ? 'refused' : 'resumed', ...(refused ? { error } : {}) });
      else if (refused) out(`the daemon refused to redrive workflow ${id}: ${formatError(error)}`);
      else out(`workflow ${id} (${wf.name}) redriven (redrive ${wf.redrives}); it is ${wf.status}`);
      return refused ? EXIT.failed : EXIT.ok;
    }
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
  }
}
