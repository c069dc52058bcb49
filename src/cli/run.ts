/**
 * `stepd run FLOW.json` or `stepd run NAME[@VERSION]`: start a workflow (an INSERT through the SQL
 * contract; by name with `flow` NULL, so the executor pins the registered version), optionally
 * following it.
 */
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { insertWorkflow } from '../db/contract.js';
import { loadFlowVersion } from '../db/queries/flows.js';
import { getWorkflowByKey } from '../db/reads.js';
import { flowNameProblem } from '../flow/flowName.js';
import { inputSchemaProblem } from '../flow/jsonSchema.js';
import { compileFlow } from '../flow/validate.js';
import { callerUser } from '../api/callerUser.js';
import { inputMismatchMessage, invalidFlowMessage, keyTakenMessage } from '../api/errors.js';
import { CliError, EXIT, note, out, outJson, parseJsonObjectArg, readJsonFile, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';
import { missingFlowMessage } from '../api/missingFlowMessage.js';
import { parseFlowRef } from './flow.js';
import { Follower } from './follow.js';
import { parseStartAt } from './startAtArg.js';
import { openToolCheck, type ToolCheckFlags } from './toolCheckSetup.js';

interface RunFlags extends DatabaseFlags {
  input?: string;
  inputFile?: string;
  name?: string;
  user?: string;
  key?: string;
  at?: string;
  follow?: boolean;
  json?: boolean;
  config?: string;
  offline?: boolean;
}

export function registerRun(program: Command): void {
  withDatabaseOptions(
    program
      .command('run')
      .description('start a workflow from a flow file or a registered flow; with --follow, show its progress and exit with its outcome')
      .argument('<flow>', 'flow JSON file (either form: {"start": "a", "steps": {…}} or the seed\'s flat form), or NAME[@VERSION] of a registered flow (stepd flow put)')
      .option('--input <json>', 'the workflow input, a JSON object (default: {})')
      .option('--input-file <file>', 'read the input from a JSON file')
      .option('--name <name>', 'workflow name (default: the flow file name)')
      .option('--user <user>', 'the user the steps run as (created_by; permissions apply). Default: $STEPD_USER, else your OS user name')
      .option('--key <key>', 'idempotency key: if a workflow with this key exists, use it instead of starting another')
      .option('--at <time>', 'start it later: a delay ("10m", "1h30m", "2d") or an ISO 8601 time ("2026-12-01T09:00:00Z"); cancel it before then with stepd cancel ID')
      .option('-f, --follow', 'print each step as it starts, finishes, retries or waits, until the workflow ends; exit 0 completed, 2 failed, 3 cancelled')
      .option('--json', 'print JSON (with --follow: one event per line)')
      .option('--config <path>', 'configuration whose MCP servers the flow\'s tools are checked against, as stepd validate does (default: ./stepd.config.json if present)')
      .option('--offline', 'do not connect to MCP servers to check their tools (the built-in tools are still checked)'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd run examples/sequential.json --input '{"topic": "AI safety"}' --follow
  stepd run examples/approval.json --user james --follow      # then, in another shell: stepd approve STEP_ID
  stepd run flow.json --input-file input.json --key order-1234 --json
  stepd run research --input '{"topic": "AI safety"}'       # the registered flow "research", latest version
  stepd run research@2 --follow                              # version 2 of it
  stepd run research --at 10m                                # admitted in 10 minutes (docs/schedules.md)
  stepd run research --at 2026-12-01T09:00:00+01:00

An argument that is not a file names a registered flow (stepd flow list): the workflow is
inserted with flow NULL (and flow_version for NAME@VERSION), and the executor runs the version
that is latest when it admits it. The flow is validated first, and the input checked against
its inputSchema; an invalid flow or input is not inserted (exit 1). As with stepd validate, an
unknown tool (core.ehco) or a literal argument the tool's input schema refuses is an issue; MCP
servers' tools are checked when a configuration names them (--config, ./stepd.config.json). Without --follow the
command prints the new workflow's id and exits 0 once it is stored; the daemon runs it.`,
    )
    .action(async (file: string, flags: RunFlags) => {
      const byName = !(await isFile(file)) && !looksLikePath(file);
      const flow = byName ? null : await readJsonFile(file, 'flow file');
      if (flags.input !== undefined && flags.inputFile !== undefined) throw new CliError('give either --input or --input-file, not both');
      const input =
        flags.inputFile !== undefined
          ? await inputFromFile(flags.inputFile)
          : flags.input !== undefined
            ? parseJsonObjectArg(flags.input, '--input')
            : {};
      if (!byName) {
        refuseInvalid(file, flow, input);
        await refuseToolIssues(file, flow, flags);
      }
      const ref = byName ? parseFlowRef(file) : undefined;
      if (ref && flags.name !== undefined && flags.name !== ref.name) {
        throw new CliError(`--name cannot rename a registered flow: a workflow started by name is called like its flow (${JSON.stringify(ref.name)})`);
      }
      const startAt = flags.at === undefined ? undefined : parseStartAt(flags.at);
      const name = ref?.name ?? flags.name ?? path.basename(file).replace(/\.json$/i, '');
      if (!name) throw new CliError('--name must not be empty');
      const user = callerUser(flags.user) ?? null;

      process.exitCode = await withDatabase(flags, async (ctx) => {
        const follower = flags.follow ? new Follower(ctx, { json: flags.json === true }) : undefined;
        await follower?.listen();
        try {
          if (ref) await checkRegisteredFlow(ctx, ref, input, flags);
          const created = await insertWorkflow(ctx.pool, { name, flow, flowVersion: ref?.version ?? null, input, createdBy: user, key: flags.key ?? null, ...(startAt ? { startAt } : {}) });
          const existing = created ? undefined : await getWorkflowByKey(ctx.db, flags.key!);
          const id = String(created?.id ?? existing?.id ?? '');
          if (!id) throw new CliError(keyTakenMessage(flags.key!));
          // With --follow too: the id comes first, then one event per line, the end event (with status, output, error) last.
          if (flags.json) {
            outJson({ id, name: created?.name ?? existing!.name, status: created?.status ?? existing!.status, created: created !== undefined, ...(created?.start_at ? { startAt: created.start_at } : {}) });
          } else if (!flags.json) {
            out(created ? `started workflow ${id} (${name})${user ? ` as ${user}` : ''}${created.start_at ? `; it starts at ${created.start_at.toISOString()} (cancel it before: stepd cancel ${id})` : ''}` : `workflow ${id} already exists with key ${JSON.stringify(flags.key)} (${existing!.status}); not starting another`);
            if (!flags.follow) out(`  follow it:  stepd watch ${id}\n  status:     stepd status ${id}`);
          }
          return follower ? await follower.follow(id) : EXIT.ok;
        } finally {
          await follower?.close();
        }
      });
    });
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}

/** A missing file is reported as such (not looked up as a flow name) when the argument looks like a path. */
function looksLikePath(arg: string): boolean {
  return /\.json$/i.test(arg) || arg.includes('/') || arg.includes(path.sep);
}

/** Refuses an invalid flow, or an input its inputSchema refuses, listing every issue with its path. */
function refuseInvalid(what: string, flow: unknown, input: Record<string, unknown>): void {
  const compiled = compileFlow(flow);
  if (!compiled.ok) throw new CliError(invalidFlowMessage(what, compiled.issues));
  const problem = inputSchemaProblem(compiled.flow.inputSchema, input);
  if (problem) throw new CliError(inputMismatchMessage(what, problem.issues));
}

/** The registered flow (the version asked for, else the latest) exists, is valid and takes this input. */
async function checkRegisteredFlow(ctx: ClientContext, ref: { name: string; version: number | null }, input: Record<string, unknown>, flags: ToolCheckFlags): Promise<void> {
  const lookAlike = flowNameProblem(ref.name);
  if (lookAlike) throw new CliError(`flow name ${JSON.stringify(ref.name)} refused: ${lookAlike}; nothing was started`);
  const row = await loadFlowVersion(ctx.pool, ref.name, ref.version);
  if (!row) throw new CliError(`${await missingFlowMessage(ctx.pool, ref.name, ref.version)}; nothing was started`);
  refuseInvalid(`flow ${ref.name}@${row.version}`, row.flow, input);
  await refuseToolIssues(`flow ${ref.name}@${row.version}`, row.flow, flags);
}

/**
 * Unknown tools and literal arguments their input schema refuses, checked as stepd validate checks
 * them (src/tools/flowToolCheck.ts). A flow that calls only built-in tools, or a folder without a
 * configuration, needs no toolbox (its MCP client is slow to load): the built-ins are checked alone.
 */
async function refuseToolIssues(what: string, flow: unknown, flags: ToolCheckFlags): Promise<void> {
  const compiled = compileFlow(flow);
  if (!compiled.ok) throw new CliError(invalidFlowMessage(what, compiled.issues));
  const [{ checkFlowTools }, { BuiltinToolLookup, toolPrefixesOf }, { BUILTIN_PREFIXES }] = await Promise.all([
    import('../tools/flowToolCheck.js'),
    import('../tools/builtinToolLookup.js'),
    import('../tools/toolCatalog.js'),
  ]);
  const callsMcp = [...toolPrefixesOf(compiled.flow.steps.values())].some((p) => !BUILTIN_PREFIXES.includes(p));
  const configured = flags.config !== undefined || existsSync(path.join(process.cwd(), 'stepd.config.json'));
  const setup = callsMcp && configured ? await openToolCheck(flags) : undefined;
  try {
    const checked = setup ? compileFlow(flow, { caps: setup.caps }) : compiled;
    if (!checked.ok) throw new CliError(invalidFlowMessage(what, checked.issues));
    const tools = await checkFlowTools(checked.flow, setup?.catalog ?? new BuiltinToolLookup());
    for (const w of tools.warnings) note(`warning: ${w.path || '(flow)'}: ${w.message}`);
    if (tools.issues.length > 0) throw new CliError(invalidFlowMessage(what, tools.issues));
  } finally {
    await setup?.close();
  }
}

async function inputFromFile(file: string): Promise<Record<string, unknown>> {
  const value = await readJsonFile(file, 'input file');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CliError(`input file ${file} must hold a JSON object`);
  return value as Record<string, unknown>;
}
