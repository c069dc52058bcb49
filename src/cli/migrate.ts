/** `stepd migrate`: apply the numbered SQL files to the schema. */
import type { Command } from 'commander';
import { databaseUrlFrom, schemaFrom } from '../config.js';
import { migrate } from '../db/migrate.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('create or upgrade the stepd tables (stepd start does this too)')
    .option('--database-url <url>', 'PostgreSQL URL (default: $DATABASE_URL)')
    .option('--schema <name>', 'schema holding the tables (default: $STEPD_SCHEMA or stepd)')
    .option('--json', 'print the result as JSON')
    .action(async (flags: { databaseUrl?: string; schema?: string; json?: boolean }) => {
      const url = databaseUrlFrom(flags.databaseUrl);
      if (!url) throw new Error('no database: set DATABASE_URL or pass --database-url');
      const schema = schemaFrom(flags.schema);
      const result = await migrate({ url, schema });
      if (flags.json) process.stdout.write(`${JSON.stringify({ schema, ...result })}\n`);
      else process.stdout.write(`schema ${schema}: ${result.applied.length} migration(s) applied, ${result.alreadyApplied.length} already present\n`);
    });
}
