/** Builds the commander program; commands live one per file next to this one. */
import { Command } from 'commander';
import { registerStart } from './start.js';
import { registerMigrate } from './migrate.js';
import { registerTools } from './tools.js';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('stepd')
    .description('A table-driven SQL step executor: multi-step workflows whose state lives in two PostgreSQL tables.')
    .showHelpAfterError()
    .configureOutput({ outputError: (str, write) => write(str) });
  registerStart(program);
  registerMigrate(program);
  registerTools(program);
  return program;
}
