#!/usr/bin/env node
/** The `stepd` command line. Each command is one small function; see --help. */
import module from 'node:module';
import { Option } from 'commander';
import { buildProgram, commandOf } from './cli/program.js';
import { handleClosedStdout } from './cli/closedStdout.js';
import { exitCodeFor, errorMessage } from './cli/common.js';

// Node keeps the compiled code of the modules a command loads (in the temp folder), so the next
// call starts faster. NODE_DISABLE_COMPILE_CACHE=1 turns it off.
module.enableCompileCache?.();

// `stepd list | head -1`: a closed stdout ends the command quietly (the daemon keeps running).
handleClosedStdout(process.stdout, { keepRunning: commandOf(process.argv.slice(2)) === 'start' });

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
