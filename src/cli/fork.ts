/**
 * `stepd fork ID [--from STEP] [--input JSON] [--result STEP=JSON]…`: a new workflow with the
 * frozen flow of workflow ID that keeps the recorded results of the steps before STEP (some
 * replaced by --result) and runs from STEP (docs/operations.md, "Fork"). The contract's
 * fork_workflow (sql/0031) on the caller's role decides who may fork what.
 */
import type { Command } from 'commander';
import { CliError, EXIT, out, outJson, parseId, parseJsonArg, parseJsonObjectArg, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { Follower } from './follow.js';

export const FORK_SUMMARY = 'start a new workflow from a chosen step of another (any status): earlier results kept, one replaced if asked';

interface ForkFlags extends DatabaseFlags {
  from?: string;
  input?: string;
  result?: string[];
  follow?: boolean;
  json?: boolean;
}

export function registerFork(program: Command): void {
  withDatabaseOptions(
    program
      .command('fork')
      .description(FORK_SUMMARY)
      .argument('<id>', 'the workflow to fork')
      .option('--from <step>', 'the step to run from (default: the start); it must have run at the top level')
      .option('--input <json>', "the fork's input, a JSON object (default: the workflow's)")
      .option('--result <step=json>', 'use this result for an earlier step instead of the recorded one (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
      .option('-f, --follow', 'then print each step until the fork ends; exit 0 completed, 2 failed, 3 cancelled')
      .option('--json', 'print JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd fork 7 --from summarize                                  # re-run from "summarize" on
  stepd fork 7 --from publish --result 'review={"approved":true,"note":"fixed"}'
  stepd fork 7 --input '{"topic":"AI safety"}' --follow          # the whole flow again, new input

The same as:  SELECT stepd.fork_workflow(7, 'summarize', NULL, '{"fetch": {"rows": 3}}');
The fork runs as the workflow's user; its row links back (forked_from). A role forks only the
workflows it started (an operator any), never a sub-workflow on its own, and may not replace the
answer of a gate (fork from the gate so its approvers answer again).`,
    )
    .action(async (idText: string, flags: ForkFlags) => {
      const id = parseId(idText, 'workflow id');
      const input = flags.input === undefined ? null : parseJsonObjectArg(flags.input, '--input');
      const results = parseResults(flags.result ?? []);
      if (results && flags.from === undefined) throw new CliError('--result needs --from (the step the fork runs from)', EXIT.invalid);
      process.exitCode = await withDatabase(flags, async (ctx) => {
        const { forkWorkflowAsRole } = await import('../db/queries/fork.js');
        if (flags.from !== undefined) {
          const { getWorkflow } = await import('../db/reads.js');
          const { forkProblemOf } = await import('../api/forkOperation.js');
          const problem = forkProblemOf((await getWorkflow(ctx.db, id))?.flow, flags.from);
          if (problem) throw new CliError(`workflow ${id} cannot be forked from there: ${problem}; nothing was started`);
        }
        const follower = flags.follow ? new Follower(ctx, { json: flags.json === true }) : undefined;
        await follower?.listen();
        try {
          const newId = await forkWorkflowAsRole(ctx.pool, { sourceId: id, fromStep: flags.from ?? null, input, results });
          const row = { id: newId, forkedFrom: id, fromStep: flags.from ?? null };
          if (flags.json) outJson(row);
          else out(`forked workflow ${id} as workflow ${newId}, running from ${flags.from ?? 'its start'}${follower ? '' : `\n  follow it:  stepd watch ${newId}\n  status:     stepd status ${newId}`}`);
          return follower ? await follower.follow(newId) : EXIT.ok;
        } finally {
          await follower?.close();
        }
      });
    });
}

/** `--result step=JSON`, each step once. */
function parseResults(items: string[]): Record<string, unknown> | null {
  if (items.length === 0) return null;
  const out: Record<string, unknown> = {};
  for (const item of items) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new CliError(`--result must be STEP=JSON, like 'fetch={"rows": 3}' (got ${JSON.stringify(item)})`, EXIT.invalid);
    const step = item.slice(0, eq);
    if (Object.hasOwn(out, step)) throw new CliError(`--result gives step "${step}" twice`, EXIT.invalid);
    out[step] = parseJsonArg(item.slice(eq + 1), `--result ${step}`);
  }
  return out;
}
