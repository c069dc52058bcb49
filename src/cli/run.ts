/** `stepd run FLOW.json`: start a workflow (an INSERT through the SQL contract), optionally following it. */
import path from 'node:path';
import type { Command } from 'commander';
import { insertWorkflow } from '../db/contract.js';
import { getWorkflowByKey } from '../db/reads.js';
import { validateFlow } from '../flow/validate.js';
import { CliError, EXIT, out, outJson, parseJsonObjectArg, readJsonFile, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';
import { Follower } from './follow.js';

interface RunFlags extends DatabaseFlags {
  input?: string;
  inputFile?: string;
  name?: string;
  user?: string;
  key?: string;
  follow?: boolean;
  json?: boolean;
}

export function registerRun(program: Command): void {
  withDatabaseOptions(
    program
      .command('run')
      .description('start a workflow from a flow file; with --follow, show its progress and exit with its outcome')
      .argument('<flow>', 'flow JSON file (either form: {"start": "a", "steps": {…}} or the seed\'s flat form)')
      .option('--input <json>', 'the workflow input, a JSON object (default: {})')
      .option('--input-file <file>', 'read the input from a JSON file')
      .option('--name <name>', 'workflow name (default: the flow file name)')
      .option('--user <user>', 'the user the steps run as (created_by; permissions apply)')
      .option('--key <key>', 'idempotency key: if a workflow with this key exists, use it instead of starting another')
      .option('-f, --follow', 'print each step as it starts, finishes, retries or waits, until the workflow ends; exit 0 completed, 2 failed, 3 cancelled')
      .option('--json', 'print JSON (with --follow: one event per line)'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd run examples/sequential.json --input '{"topic": "AI safety"}' --follow
  stepd run examples/approval.json --user james --follow      # then, in another shell: stepd approve STEP_ID
  stepd run flow.json --input-file input.json --key order-1234 --json

The flow is validated first; an invalid flow is not inserted (exit 1). Without --follow the
command prints the new workflow's id and exits 0 once it is stored; the daemon runs it.`,
    )
    .action(async (file: string, flags: RunFlags) => {
      const flow = await readJsonFile(file, 'flow file');
      const issues = validateFlow(flow);
      if (issues.length > 0) {
        throw new CliError(`${file} is not a valid flow (${issues.length} issue(s)); nothing was started:\n${issues.map((i) => `  ${i.path || '(flow)'}: ${i.message}`).join('\n')}`);
      }
      if (flags.input !== undefined && flags.inputFile !== undefined) throw new CliError('give either --input or --input-file, not both');
      const input =
        flags.inputFile !== undefined
          ? await inputFromFile(flags.inputFile)
          : flags.input !== undefined
            ? parseJsonObjectArg(flags.input, '--input')
            : {};
      const name = flags.name ?? path.basename(file).replace(/\.json$/i, '');
      if (!name) throw new CliError('--name must not be empty');

      process.exitCode = await withDatabase(flags, async (ctx) => {
        const follower = flags.follow ? new Follower(ctx, { json: flags.json === true }) : undefined;
        await follower?.listen();
        try {
          const created = await insertWorkflow(ctx.pool, { name, flow, input, createdBy: flags.user ?? null, key: flags.key ?? null });
          const existing = created ? undefined : await getWorkflowByKey(ctx.db, flags.key!);
          const id = String(created?.id ?? existing?.id ?? '');
          if (!id) throw new CliError(`could not start the workflow: key ${JSON.stringify(flags.key)} is taken but its workflow was not found`);
          if (flags.json && !flags.follow) {
            outJson({ id, name: created?.name ?? existing!.name, status: created?.status ?? existing!.status, created: created !== undefined });
          } else if (!flags.json) {
            out(created ? `started workflow ${id} (${name})` : `workflow ${id} already exists with key ${JSON.stringify(flags.key)} (${existing!.status}); not starting another`);
            if (!flags.follow) out(`  follow it:  stepd watch ${id}\n  status:     stepd status ${id}`);
          }
          return follower ? await follower.follow(id) : EXIT.ok;
        } finally {
          await follower?.close();
        }
      });
    });
}

async function inputFromFile(file: string): Promise<Record<string, unknown>> {
  const value = await readJsonFile(file, 'input file');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CliError(`input file ${file} must hold a JSON object`);
  return value as Record<string, unknown>;
}
