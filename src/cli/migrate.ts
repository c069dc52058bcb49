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

Applying twice changes nothing. Also creates (when this login may) the NOLOGIN roles
<schema>_executor and <schema>_client and grants them; otherwise prints the SQL a DBA runs.
Schedules: installs or upgrades pg-boss's schema <schema>_boss beside it (pg-boss's own SQL)
and grants the executor role on it (the client role gets nothing there: clients write
stepd's schedules table, the daemon syncs pg-boss); a login that may not create it gets that
SQL to hand to a DBA.
A migration file edited after it was applied is reported, never silently re-applied.`,
    )
    .action(async (flags: DatabaseFlags & { json?: boolean }) => {
      const target = await resolveTarget(flags);
      let result;
      try {
        result = await migrate({ url: target.url, schema: target.schema });
      } catch (err) {
        throw toCliError(err, target);
      }
      if (flags.json) {
        outJson({ schema: target.schema, ...result });
        return;
      }
      out(`schema ${target.schema}: ${result.applied.length} migration(s) applied, ${result.alreadyApplied.length} already present`);
      if (result.changed.length > 0) {
        out(`warning: applied migration(s) edited since they were applied (the database keeps what it applied): ${result.changed.join(', ')}`);
      }
      if (result.roles.status === 'ready') out(`roles: ${result.roles.executor} (the daemon's) and ${result.roles.client} (other services') are ready`);
      if (result.roles.status === 'needs-dba') {
        out(`roles: this login may not create roles. Ask a DBA (a superuser or a role with CREATEROLE) to run:\n\n${result.rolesSql}\n`);
      }
      if (result.boss?.status === 'needs-dba') {
        out(`schedules: this login may not create or upgrade pg-boss's schema ${result.boss.schema}. Ask a DBA to run:\n\n${result.boss.sql}\n`);
      } else if (result.boss) {
        out(`schedules: pg-boss schema ${result.boss.schema} ${result.boss.status === 'ready' ? 'is ready' : result.boss.status} (version ${result.boss.version})`);
      }
      out(`Grant services the contract with: GRANT ${result.roles.client} TO app_service; run the daemon as a member of ${result.roles.executor}.`);
    });
}
