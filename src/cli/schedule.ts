/**
 * `stepd schedule add|list|remove`: cron starts of registered flows, run by the daemon through
 * pg-boss (docs/schedules.md). Writes go through src/schedules/scheduleStore.ts on the CLI's
 * client connection, so the database records this login as the schedule's author.
 */
import { Option, type Command } from 'commander';
import { CATCH_UP_POLICIES, listSchedules, OVERLAP_POLICIES, type CatchUpPolicy, type OverlapPolicy } from '../db/queries/schedules.js';
import { registerSchedulePause } from './schedulePause.js';
import { addSchedule, nextOccurrences, removeSchedule, ScheduleError } from '../schedules/scheduleStore.js';
import { scheduleListing, scheduleView as view } from '../api/views/scheduleView.js';
import { CliError, out, outJson, parseJsonObjectArg, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';

interface AddFlags extends DatabaseFlags {
  cron: string;
  flow: string;
  input?: string;
  tz?: string;
  user?: string;
  json?: boolean;
  overlap?: OverlapPolicy;
  catchUp?: CatchUpPolicy;
}

export function registerSchedule(program: Command): void {
  const schedule = program
    .command('schedule')
    .description('cron schedules that start registered flows (run by the daemon through pg-boss)')
    .addHelpText(
      'after',
      `
Examples:
  stepd schedule add nightly-report --cron "0 2 * * *" --flow report --input '{"days": 1}' --tz Europe/Paris --user james
  stepd schedule list
  stepd schedule pause nightly-report
  stepd schedule resume nightly-report
  stepd schedule remove nightly-report

Each tick starts exactly one workflow of the flow's latest registered version, with the key
schedule:NAME:<tick time>, however many daemons run. See docs/schedules.md.`,
    );

  withDatabaseOptions(
    schedule
      .command('add')
      .description('add a schedule (or replace the one with that name)')
      .argument('<name>', "the schedule's name: letters, digits, '_', '.', '-'")
      .requiredOption('--cron <expr>', 'when: a cron expression, minute hour day-of-month month day-of-week (one tick per minute at most)')
      .requiredOption('--flow <name>', 'the registered flow to start (stepd flow list)')
      .option('--input <json>', 'the input of each workflow, a JSON object (default: {})')
      .option('--tz <zone>', 'the time zone the cron is read in (default: UTC)')
      .option('--user <user>', 'the user the steps run as (created_by); your database role must be allowed to act as it')
      .addOption(new Option('--overlap <policy>', "while the previous tick's workflow is still new or running: allow (start anyway), skip (start nothing), cancel-previous (cancel it, then start)").choices(OVERLAP_POLICIES).default('allow'))
      .addOption(new Option('--catch-up <policy>', 'ticks missed while no daemon ran: none, latest (the most recent one), all (each, oldest first; at most 100 of the last 7 days)').choices(CATCH_UP_POLICIES).default('none'))
      .option('--json', 'print the schedule as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd schedule add hourly-sync --cron "0 * * * *" --flow sync
  stepd schedule add weekday-digest --cron "30 8 * * 1-5" --tz America/New_York --flow digest --input '{"to": "team"}' --user james
  stepd schedule add every-minute --cron "* * * * *" --flow heartbeat --json
  stepd schedule add nightly-etl --cron "0 2 * * *" --flow etl --overlap skip --catch-up latest

Refused (exit 1): a flow that is not registered, a cron expression that does not parse, an
unknown time zone. Adding a name that exists replaces that schedule (its policies too; a paused
schedule stays paused). The database records your
login as the schedule's author; at each tick the executor admits the workflow only if that role
may act as --user (config "clients"), exactly as if you had inserted it yourself.`,
    )
    .action(async (name: string, flags: AddFlags) => {
      const input = flags.input === undefined ? {} : parseJsonObjectArg(flags.input, '--input');
      const tz = flags.tz ?? 'UTC';
      await withDatabase(flags, async (ctx) => {
        const row = await withClient(ctx, (client) => addSchedule(client, ctx.schema, { name, cron: flags.cron, tz, flow: flags.flow, input, createdBy: flags.user ?? null, overlap: flags.overlap ?? 'allow', catchUp: flags.catchUp ?? 'none' }));
        const next = nextOccurrences(row.cron, row.tz, 3);
        if (flags.json) {
          outJson({ ...view(row), created: row.created, next: next.map((d) => d.toISOString()) });
          return;
        }
        out(`${row.created ? 'added' : 'replaced'} schedule ${row.name}: flow ${row.flow} at "${row.cron}" (${row.tz})${row.created_by ? ` as ${row.created_by}` : ''}`);
        out(`  next ticks: ${next.map((d) => d.toISOString()).join(', ')}${row.paused ? ' (paused: stepd schedule resume ' + row.name + ')' : ''}`);
        out(`  overlap ${row.overlap}, catch-up ${row.catch_up}`);
        out('  the daemon (stepd start) starts one workflow per tick');
      });
    });

  withDatabaseOptions(schedule.command('list').description('list schedules with their next tick').option('--json', 'print JSON (one array)'))
    .addHelpText(
      'after',
      `
Examples:
  stepd schedule list
  stepd schedule list --json | jq '.[].name'

Workflows a schedule started carry the key schedule:NAME:<tick time>:
  SELECT id, status, key FROM stepd.workflows WHERE key LIKE 'schedule:NAME:%' ORDER BY id DESC;`,
    )
    .action(async (flags: DatabaseFlags & { json?: boolean }) => {
      await withDatabase(flags, async (ctx) => {
        const rows = await listSchedules(ctx.pool);
        const views = rows.map(scheduleListing);
        if (flags.json) {
          outJson(views);
          return;
        }
        if (views.length === 0) {
          out('no schedules (add one: stepd schedule add NAME --cron EXPR --flow FLOW)');
          return;
        }
        for (const v of views) {
          const policies = `${v.overlap !== 'allow' ? `  overlap ${v.overlap}` : ''}${v.catchUp !== 'none' ? `  catch-up ${v.catchUp}` : ''}`;
          out(`${v.name}  "${v.cron}" (${v.tz})  flow ${v.flow}${v.user ? `  as ${v.user}` : ''}  next ${v.paused ? 'paused' : (v.next ?? '-')}  by ${v.role ?? '-'}${policies}`);
        }
      });
    });

  withDatabaseOptions(schedule.command('remove').description('remove a schedule (workflows it started are not touched)').argument('<name>', "the schedule's name").option('--json', 'print the removed schedule as JSON'))
    .addHelpText(
      'after',
      `
Examples:
  stepd schedule remove nightly-report

An unknown name is refused with exit code 1. Workflows already started keep running; cancel
them with stepd cancel ID.`,
    )
    .action(async (name: string, flags: DatabaseFlags & { json?: boolean }) => {
      await withDatabase(flags, async (ctx) => {
        const row = await withClient(ctx, (client) => removeSchedule(client, ctx.schema, name));
        if (flags.json) outJson({ ...view(row), removed: true });
        else out(`removed schedule ${row.name}`);
      });
    });

  registerSchedulePause(schedule, { withClient, view });
}

/** Runs `fn` on one connection of the CLI's pool; refusals become exit code 1 with their message. */
export async function withClient<T>(ctx: ClientContext, fn: (client: import('pg').PoolClient) => Promise<T>): Promise<T> {
  const client = await ctx.pool.connect();
  try {
    return await fn(client);
  } catch (err) {
    if (err instanceof ScheduleError) throw new CliError(err.message);
    throw err;
  } finally {
    client.release();
  }
}
