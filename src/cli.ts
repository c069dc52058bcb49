#!/usr/bin/env node
/** The `stepd` command line. Each command is one small function; see --help. */
import { Command, Option } from 'commander';
import { buildProgram } from './cli/program.js';

const program: Command = buildProgram();
program.addOption(new Option('--no-color', 'plain output').hideHelp());
program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`stepd: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(typeof (err as { exitCode?: unknown })?.exitCode === 'number' ? (err as { exitCode: number }).exitCode : 1);
});
