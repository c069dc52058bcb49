#!/usr/bin/env node
/** The `stepd` command line. Each command is one small function; see --help. */
import module from 'node:module';
import { Option } from 'commander';
import { buildProgram } from './cli/program.js';
import { exitCodeFor, errorMessage } from './cli/common.js';

// Node keeps the compiled code of the modules a command loads (in the temp folder), so the next
// call starts faster. NODE_DISABLE_COMPILE_CACHE=1 turns it off.
module.enableCompileCache?.();

// Not a top-level await: a command that runs until a signal (start, watch) must not hold this
// module's evaluation open.
buildProgram(process.argv.slice(2))
  .then((program) => {
    program.addOption(new Option('--no-color', 'plain output').hideHelp());
    return program.parseAsync(process.argv);
  })
  .catch((err: unknown) => {
    process.stderr.write(`stepd: ${errorMessage(err)}\n`);
    process.exit(exitCodeFor(err));
  });
