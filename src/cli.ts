#!/usr/bin/env node
/** The `stepd` command line. Each command is one small function; see --help. */
import { Command, Option } from 'commander';
import { buildProgram } from './cli/program.js';
import { exitCodeFor, errorMessage } from './cli/common.js';

const program: Command = buildProgram();
program.addOption(new Option('--no-color', 'plain output').hideHelp());
program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`stepd: ${errorMessage(err)}\n`);
  process.exit(exitCodeFor(err));
});
