/** Builds the commander program; commands live one per file next to this one. */
import { Command } from 'commander';
import { registerApprove } from './approve.js';
import { registerCancel } from './cancel.js';
import { EXIT_CODES_HELP } from './common.js';
import { registerFlow } from './flow.js';
import { registerList } from './list.js';
import { registerMcp } from './mcp.js';
import { registerMigrate } from './migrate.js';
import { registerRetry } from './retry.js';
import { registerRun } from './run.js';
import { registerSchedule } from './schedule.js';
import { registerStart } from './start.js';
import { registerStatus } from './status.js';
import { registerTools } from './tools.js';
import { registerValidate } from './validate.js';
import { registerWatch } from './watch.js';

export function buildProgram(): Command {
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
  registerStart(program);
  registerRun(program);
  registerStatus(program);
  registerList(program);
  registerApprove(program);
  registerCancel(program);
  registerRetry(program);
  registerWatch(program);
  registerValidate(program);
  registerFlow(program);
  registerSchedule(program);
  registerMigrate(program);
  registerTools(program);
  registerMcp(program);
  for (const cmd of program.commands) cmd.addHelpText('after', EXIT_CODES_HELP);
  return program;
}
