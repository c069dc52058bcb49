/**
 * `stepd signal NAME [--key K] [--payload JSON]`: sends a signal through the SQL contract (an
 * INSERT into signals, as this connection's database role), by the same operation the MCP tool
 * `send_signal` uses (src/api/operations.ts). Prints the new signal's id.
 */
import type { Command } from 'commander';
import { Operations } from '../api/operations.js';
import { out, outJson, parseJsonObjectArg, withDatabase, withDatabaseOptions, type DatabaseFlags } from './common.js';

interface SignalFlags extends DatabaseFlags {
  key?: string;
  payload?: string;
  json?: boolean;
}

export function registerSignal(program: Command): void {
  withDatabaseOptions(
    program
      .command('signal')
      .description('send a signal (a named message with an optional key and a JSON payload): the workflows waiting for it go on')
      .argument('<name>', 'the signal name, like payment.received')
      .option('--key <key>', 'its business key, like order-42 (default: none)')
      .option('--payload <json>', 'a JSON object the waiting step receives as result.payload (default: {})')
      .option('--json', 'print the inserted signal row as JSON'),
  )
    .addHelpText(
      'after',
      `
Examples:
  stepd signal payment.received --key order-42 --payload '{"amount": 1200}'
  stepd signal inventory.restocked

The same as:  INSERT INTO stepd.signals (name, key, payload)
                VALUES ('payment.received', 'order-42', '{"amount": 1200}');
A service sends it with that INSERT, in the transaction of its own business write. Every workflow
waiting for this name (and key) receives it; one waiting with "since": "workflow" receives it
even when it starts waiting later. Signals come in; stepd's events (stepd watch) go out.
See docs/signals.md.`,
    )
    .action(async (name: string, flags: SignalFlags) => {
      const payload = flags.payload === undefined ? {} : parseJsonObjectArg(flags.payload, '--payload');
      await withDatabase(flags, async (ctx) => {
        const ops = new Operations({ pool: ctx.pool, db: ctx.db, schema: ctx.schema });
        const sent = await ops.sendSignal('', { name, ...(flags.key !== undefined ? { key: flags.key } : {}), payload });
        if (flags.json) outJson(sent);
        else out(sent.signalId);
      });
    });
}
