/**
 * `stepd schedule pause|resume NAME`: a paused schedule's ticks start nothing until it is resumed;
 * resuming does not catch up the ticks that fell while it was paused (docs/schedules.md). Only the
 * schedule's owner (a member of that role, or a trusted role) may do it, as for replacing it.
 */
import type { Command } from 'commander';
import type pg from 'pg';
import { setSchedulePausedAsCaller, type ScheduleRow } from '../db/queries/schedules.js';
import { ScheduleError } from '../schedules/scheduleStore.js';
import { out, outJson, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';

export interface SchedulePauseDeps {
  withClient: <T>(ctx: ClientContext, fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
  view: (r: ScheduleRow) => object;
}

export function registerSchedulePause(schedule: Command, deps: SchedulePauseDeps): void {
  for (const paused of [true, false]) {
    const verb = paused ? 'pause' : 'resume';
    withDatabaseOptions(
      schedule
        .command(verb)
        .description(paused ? 'pause a schedule: its ticks start nothing until it is resumed' : 'resume a paused schedule from its next tick (the paused ticks are not caught up)')
        .argument('<name>', "the schedule's name")
        .option('--json', 'print the schedule as JSON'),
    )
      .addHelpText(
        'after',
        `
Examples:
  stepd schedule ${verb} nightly-report
  stepd schedule ${verb} nightly-report --json

An unknown name is refused with exit code 1; so is another role's schedule (only its owner, a
member of that role or a trusted role may ${verb} it). ${paused ? 'Workflows already started keep running.' : 'Ticks that fell while it was paused are not started, whatever --catch-up says.'}`,
      )
      .action(async (name: string, flags: DatabaseFlags & { json?: boolean }) => {
        await withDatabase(flags, async (ctx) => {
          const row = await deps.withClient(ctx, async (client) => {
            const r = await setSchedulePausedAsCaller(client, name, paused);
            if (!r) throw new ScheduleError('not_found', `there is no schedule named ${JSON.stringify(name)} (stepd schedule list)`);
            return r;
          });
          if (flags.json) outJson({ ...deps.view(row), changed: row.changed });
          else if (!row.changed) out(`schedule ${row.name} was already ${paused ? 'paused' : 'running'}`);
          else out(paused ? `paused schedule ${row.name} (resume it with: stepd schedule resume ${row.name})` : `resumed schedule ${row.name}: the daemon starts its next tick`);
        });
      });
  }
}
