/**
 * Builds the commander program; commands live one per file next to this one. Only the command
 * being run is loaded (with its database, MCP or pg-boss modules); the others are listed by name
 * and summary, so `stepd --help` and every command start without loading what they do not use.
 */
import { Command } from 'commander';
import { EXIT_CODES_HELP } from './common.js';

type Register = (program: Command) => void;

export interface CommandEntry {
  name: string;
  /** Its description, as `stepd --help` lists it (the same text the command's module sets; a test checks). */
  summary: string;
  load: () => Promise<Register>;
}

/** Every command, in the order `stepd --help` lists them. A new command: add a line here. */
export const COMMANDS: readonly CommandEntry[] = [
  { name: 'start', summary: 'run the executor daemon (applies migrations first); without DATABASE_URL, on an embedded PostgreSQL in .stepd/', load: async () => (await import('./start.js')).registerStart },
  { name: 'run', summary: 'start a workflow from a flow file or a registered flow; with --follow, show its progress and exit with its outcome', load: async () => (await import('./run.js')).registerRun },
  { name: 'status', summary: 'show a workflow and its steps: fan-outs nested under their fork, attempts, durations, errors, waiting gates', load: async () => (await import('./status.js')).registerStatus },
  { name: 'list', summary: 'list workflows, newest first', load: async () => (await import('./list.js')).registerList },
  { name: 'approve', summary: 'approve (or with --reject, reject) a gate that is waiting: readies the pending step', load: async () => (await import('./approve.js')).registerApprove },
  { name: 'signal', summary: 'send a signal (a named message with an optional key and a JSON payload): the workflows waiting for it go on', load: async () => (await import('./signal.js')).registerSignal },
  { name: 'cancel', summary: 'cancel a workflow that is new or running; its live steps are cancelled and running tools aborted', load: async () => (await import('./cancel.js')).registerCancel },
  { name: 'retry', summary: 'redrive a failed workflow: its failed steps get new attempts, done steps keep their results, and it goes on from there', load: async () => (await import('./retry.js')).registerRetry },
  { name: 'fork', summary: 'start a new workflow from a chosen step of another (any status): earlier results kept, one replaced if asked', load: async () => (await import('./fork.js')).registerFork },
  { name: 'prune', summary: 'delete finished workflows (with their steps and sub-workflows) and signals older than their retention; --dry-run lists them', load: async () => (await import('./prune.js')).registerPrune },
  { name: 'watch', summary: 'stream lifecycle events; with an ID, follow that workflow until it ends and exit with its outcome', load: async () => (await import('./watch.js')).registerWatch },
  { name: 'validate', summary: 'check a flow file the way the executor does (shape, the graph, the tools it calls) and print every issue with its path', load: async () => (await import('./validate.js')).registerValidate },
  { name: 'flow', summary: 'the flow registry: store named, versioned flows and start them by name (stepd run NAME)', load: async () => (await import('./flow.js')).registerFlow },
  { name: 'schedule', summary: 'cron schedules that start registered flows (run by the daemon through pg-boss)', load: async () => (await import('./schedule.js')).registerSchedule },
  { name: 'trigger', summary: 'signal triggers: each matching signal starts one workflow of a registered flow', load: async () => (await import('./trigger.js')).registerTrigger },
  { name: 'migrate', summary: 'create or upgrade the stepd tables (stepd start does this too)', load: async () => (await import('./migrate.js')).registerMigrate },
  { name: 'tools', summary: 'list every tool (built-ins and configured MCP servers) with its description and input schema', load: async () => (await import('./tools.js')).registerTools },
  { name: 'mcp', summary: 'serve the workflow operations as MCP tools on stdio (start, get, list, approve, reject, cancel, retry, validate…) for an agent', load: async () => (await import('./mcp.js')).registerMcp },
];

/** The command `argv` (the arguments after `stepd`) runs: the first word, or the one after `help`. */
export function commandOf(argv: readonly string[]): string | undefined {
  const words = argv.filter((a) => !a.startsWith('-'));
  return words[0] === 'help' ? words[1] : words[0];
}

/**
 * The program, with the commands in `load` registered in full (default: the one `argv` runs) and
 * the others as name and summary only.
 */
export async function buildProgram(argv: readonly string[] = process.argv.slice(2), load: 'one' | 'all' = 'one'): Promise<Command> {
  const wanted = commandOf(argv);
  const program = new Command();
  program
    .name('stepd')
    .description('A table-driven SQL step executor: multi-step workflows whose state lives in two PostgreSQL tables.')
    .showHelpAfterError()
    .configureOutput({ outputError: (str, write) => write(str) })
    .addHelpText(
      'after',
      `
Quick start (no PostgreSQL needed: without DATABASE_URL, stepd runs an embedded one in .stepd/):
  stepd start                                       # the daemon; prints DATABASE_URL=…
  stepd run examples/approval.json --follow         # in a second shell
  stepd approve STEP_ID                             # the id run --follow printed

Database: --database-url or $DATABASE_URL; otherwise commands use the embedded PostgreSQL that
\`stepd start\` runs in this folder (they never start it themselves), and exit 4 if it is not running.
${EXIT_CODES_HELP}

Run \`stepd help COMMAND\` for a command's options and examples.`,
    );
  for (const entry of COMMANDS) {
    if (load === 'all' || entry.name === wanted) (await entry.load())(program);
    else program.command(entry.name).description(entry.summary);
  }
  for (const cmd of program.commands) cmd.addHelpText('after', EXIT_CODES_HELP);
  return program;
}
