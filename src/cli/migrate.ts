/** `stepd migrate`: apply the numbered SQL files to the schema. */
import type { Command } from 'commander';
import { migrate } from '../db/migrate.js';
import { out, outJson, resolveTarget, toCliError, withDatabaseOptions, type DatabaseFlags } from './common.js';

export function registerMigrate(program: Command): void {
  withDatabaseOptions(
    program
      .command('migrate')
      .description('create or upgrade the stepd tables (stepd start does this too)')
      .option('--json', 'print the result as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  DATABASE_URL=postgres://localhost/app stepd migrate
  stepd migrate --schema jobs --json

Applying twice changes nothing.`,
    )
    .action(async (flags: DatabaseFlags & { json?: boolean }) => {
      const target = await resolveTarget(flags);
      let result;
      try {
        result = await migrate({ url: target.url, schema: target.schema });
      } catch (err) {
        throw toCliError(err, target);
      }
      if (flags.json) outJson({ schema: target.schema, ...result });
      else out(`schema ${target.schema}: ${result.applied.length} migration(s) applied, ${result.alreadyApplied.length} already present`);
    });
}
