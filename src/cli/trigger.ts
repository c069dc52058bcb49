/**
 * `stepd trigger add|list|remove|sql`: signals that start registered flows (docs/signals.md).
 * add/list/remove write the `triggers` table on the CLI's client connection, so the database
 * records this login as the trigger's writer; the database itself starts one workflow per
 * matching signal and trigger, in the signal's transaction. `sql` prints what a DBA installs on
 * an application table so that its row changes send signals.
 */
import type { Command } from 'commander';
import type pg from 'pg';
import { listTriggers, type TriggerRow } from '../db/queries/signalTriggers.js';
import { parseRowEvents, tableTriggerSql } from '../signals/tableTriggerSql.js';
import { addTrigger, parseTemplateArg, removeTrigger, TriggerError } from '../signals/triggerStore.js';
import { CliError, out, outJson, withDatabase, withDatabaseOptions, type ClientContext, type DatabaseFlags } from './common.js';

interface AddFlags extends DatabaseFlags {
  signal: string;
  flow: string;
  input?: string;
  user?: string;
  json?: boolean;
}

interface SqlFlags {
  table: string;
  on: string;
  signal: string;
  key?: string;
  schema?: string;
}

export function registerTrigger(program: Command): void {
  const trigger = program
    .command('trigger')
    .description('signal triggers: each matching signal starts one workflow of a registered flow')
    .addHelpText(
      'after',
      `
Examples:
  stepd trigger add ship-paid --signal payment.received --flow ship --input '{"order": "{{signal.key}}"}'
  stepd trigger list
  stepd trigger remove ship-paid
  stepd trigger sql --table app.orders --on insert,update --signal order.changed --key id

Each signal named --signal starts exactly one workflow per trigger (key signal:NAME:<signal id>),
in the transaction that inserts the signal, whatever the daemons do. See docs/signals.md.`,
    );

  withDatabaseOptions(
    trigger
      .command('add')
      .description('add a trigger (or replace the one with that name)')
      .argument('<name>', "the trigger's name: letters, digits, '_', '.', '-'")
      .requiredOption('--signal <name>', 'the signal name that starts a workflow')
      .requiredOption('--flow <name>', 'the registered flow to start (stepd flow list)')
      .option('--input <template>', 'the input of each workflow: a JSON object with templates such as {{signal.key}} (default: "{{signal.payload}}")')
      .option('--user <user>', 'the user the steps run as (created_by); your database role must be allowed to act as it (default: the signal\'s writing role)')
      .option('--json', 'print the trigger as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd trigger add ship-paid --signal payment.received --flow ship
  stepd trigger add notify --signal order.changed --flow notify --input '{"order": "{{signal.key}}", "total": "{{signal.payload.total}}"}' --user orders-bot

Templates: {{signal.id}}, {{signal.name}}, {{signal.key}}, {{signal.at}}, {{signal.role}},
{{signal.payload}} and paths into it ({{signal.payload.items[0].sku}}). A string that is exactly
one template keeps the value's type. A path the payload lacks fails that workflow with
invalid_input; the signal itself is always stored.

Who the workflow runs as: --user, else the role that wrote the signal. The database records your
login as the trigger's writer, and the daemon admits each workflow only if that role may act as
that user (config "clients"), exactly as if you had inserted it yourself; otherwise it fails
with permission_denied before any step runs.

Refused (exit 1): a flow that is not registered, --input that is not JSON or names an unknown
template, a trigger another role added.`,
    )
    .action(async (name: string, flags: AddFlags) => {
      const input = flags.input === undefined ? undefined : cliRefusal(() => parseTemplateArg(flags.input!));
      await withDatabase(flags, async (ctx) => {
        const row = await withClient(ctx, (client) => addTrigger(client, { name, signal: flags.signal, flow: flags.flow, input, runAs: flags.user ?? null }));
        if (flags.json) {
          outJson({ ...view(row), created: row.created });
          return;
        }
        out(`${row.created ? 'added' : 'replaced'} trigger ${row.name}: signal ${row.signal} starts flow ${row.flow}${row.run_as ? ` as ${row.run_as}` : ''}`);
        out(`  input ${JSON.stringify(row.input)}; workflow keys signal:${row.name}:<signal id>`);
      });
    });

  withDatabaseOptions(trigger.command('list').description('list signal triggers').option('--json', 'print JSON (one array)'))
    .addHelpText(
      'after',
      `
Examples:
  stepd trigger list
  stepd trigger list --json | jq '.[].name'

Workflows a trigger started carry the key signal:NAME:<signal id>:
  SELECT id, status, key FROM stepd.workflows WHERE key LIKE 'signal:NAME:%' ORDER BY id DESC;`,
    )
    .action(async (flags: DatabaseFlags & { json?: boolean }) => {
      await withDatabase(flags, async (ctx) => {
        const views = (await listTriggers(ctx.pool)).map(view);
        if (flags.json) {
          outJson(views);
          return;
        }
        if (views.length === 0) {
          out('no triggers (add one: stepd trigger add NAME --signal SIGNAL --flow FLOW)');
          return;
        }
        for (const v of views) {
          out(`${v.name}  signal ${v.signal}  flow ${v.flow}${v.user ? `  as ${v.user}` : ''}  input ${JSON.stringify(v.input)}  by ${v.role ?? '-'}`);
        }
      });
    });

  withDatabaseOptions(trigger.command('remove').description('remove a trigger (workflows it started are not touched)').argument('<name>', "the trigger's name").option('--json', 'print the removed trigger as JSON'))
    .addHelpText(
      'after',
      `
Examples:
  stepd trigger remove ship-paid

An unknown name, or a trigger another role added, is refused with exit code 1. Workflows already
started keep running; cancel them with stepd cancel ID.`,
    )
    .action(async (name: string, flags: DatabaseFlags & { json?: boolean }) => {
      await withDatabase(flags, async (ctx) => {
        const row = await withClient(ctx, (client) => removeTrigger(client, name));
        if (flags.json) outJson({ ...view(row), removed: true });
        else out(`removed trigger ${row.name}`);
      });
    });

  trigger
    .command('sql')
    .description('print the SQL that makes row changes of an application table send signals (for a DBA to install)')
    .requiredOption('--table <schema.table>', 'the application table (exact names, as quote_ident reads them)')
    .requiredOption('--signal <name>', 'the signal each row change sends')
    .option('--on <changes>', 'which row changes: insert, update, delete, separated by commas', 'insert,update')
    .option('--key <column>', "the column whose value (as text) is the signal's key (default: no key)")
    .option('--schema <name>', "stepd's schema, which holds the signals table (default: $STEPD_SCHEMA or stepd)")
    .addHelpText(
      'after',
      `
Examples:
  stepd trigger sql --table app.orders --on insert,update --signal order.changed --key id > orders-signals.sql
  psql "$DATABASE_URL" -f orders-signals.sql

Prints a CREATE FUNCTION and a CREATE TRIGGER: each row change inserts a signal (key: the
--key column as text, payload: the row as JSON) in the transaction that changes the row, so a
change that rolls back sends nothing. Nothing is installed by this command. The roles that
change the table need INSERT on stepd's signals table (GRANT <schema>_client TO them).`,
    )
    .action(async (flags: SqlFlags) => {
      const { schemaFrom } = await import('../config.js');
      const schema = cliRefusal(() => schemaFrom(flags.schema));
      const sql = cliRefusal(() =>
        tableTriggerSql({ schema, table: flags.table, on: parseRowEvents(flags.on), signal: flags.signal, ...(flags.key !== undefined ? { keyColumn: flags.key } : {}) }),
      );
      process.stdout.write(sql);
    });
}

/** A refusal of the arguments as exit code 1 with its message. */
function cliRefusal<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof Error) throw new CliError(err.message);
    throw err;
  }
}

/** Runs `fn` on one connection of the CLI's pool; refusals become exit code 1 with their message. */
async function withClient<T>(ctx: ClientContext, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await ctx.pool.connect();
  try {
    return await fn(client);
  } catch (err) {
    if (err instanceof TriggerError) throw new CliError(err.message);
    throw err;
  } finally {
    client.release();
  }
}

function view(r: TriggerRow) {
  return { name: r.name, signal: r.signal, flow: r.flow, input: r.input, user: r.run_as, role: r.created_role, owner: r.owner_role, createdAt: r.created_at, updatedAt: r.updated_at };
}
