/**
 * `stepd start`: the daemon. Without DATABASE_URL it first starts the embedded PostgreSQL in
 * .stepd/ (DESIGN.md §6) and prints its URL; then migrates and runs the executor until
 * SIGINT/SIGTERM. Stopping stops the executor first, then the embedded server. This file is the
 * command (options, help, messages, exit codes); what it starts is wired in src/daemon/.
 */
import type { Command } from 'commander';
import type { DaemonFlags, RunningDaemon } from '../daemon/startDaemon.js';
import type { DaemonStartError } from '../daemon/daemonStartError.js';
import { CliError, EXIT, dataDirFrom, isConnectionError, out, toCliError } from './common.js';
import { redactUrl } from '../api/views/format.js';
import { waitForStop } from '../waitForStop.js';

export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run the executor daemon (applies migrations first); without DATABASE_URL, on an embedded PostgreSQL in .stepd/')
    .option('--database-url <url>', 'PostgreSQL URL (default: $DATABASE_URL; without one, the embedded PostgreSQL)')
    .option('--data-dir <dir>', 'folder of the embedded PostgreSQL (default: $STEPD_DATA_DIR or .stepd)')
    .option('--schema <name>', 'schema holding the tables (default: $STEPD_SCHEMA or stepd)')
    .option('--executor-id <id>', 'this executor\'s identity; unique per running executor (default: host name)')
    .option('--concurrency <n>', 'tool calls in flight at once (default: 256; see docs/limits-and-fairness.md)')
    .option('--poll-interval <duration>', 'fallback poll when no wake-up arrives (default: 1s)')
    .option('--watchdog-interval <duration>', 'how often dead executors, stuck steps, gate and workflow deadlines are checked (default: 2s)')
    .option('--lease-grace <duration>', 'added to a step\'s timeout before the watchdog rescues it (default: 30s)')
    .option('--shutdown-grace <duration>', 'how long a stop waits for running steps (default: 30s)')
    .option('--heartbeat-interval <duration>', 'how often this executor marks itself alive (default: 2s; $STEPD_HEARTBEAT_INTERVAL)')
    .option('--dead-after <duration>', 'an executor silent this long counts as dead and its running steps are re-run (default: 15s; $STEPD_DEAD_AFTER)')
    .option('--config <path>', 'configuration file: MCP servers, permissions, limits (default: ./stepd.config.json if present)')
    .option('--no-events', 'do not NOTIFY lifecycle events on stepd_events')
    .option('--no-schedules', 'do not run schedules (pg-boss) in this daemon; other daemons on the schema still do (docs/schedules.md)')
    .option('--http <port>', 'serve the dashboard, /mcp and /metrics on this port (0: any free port; default: $STEPD_HTTP, else no HTTP)')
    .option('--http-host <host>', 'address the HTTP server listens on (default: $STEPD_HTTP_HOST or 127.0.0.1)')
    .option('--user <name>', 'who HTTP requests act as when the config has no api.tokens (loopback only; default: $STEPD_USER, else your OS user)')
    .addHelpText(
      'after',
      `
Examples:
  stepd start                                   # embedded PostgreSQL in ./.stepd, prints its URL
  DATABASE_URL=postgres://localhost/app stepd start
  stepd start --database-url postgres://localhost/app --concurrency 64 --schema jobs
  stepd start --http 8080                       # dashboard at http://127.0.0.1:8080/ (docs/dashboard.md)

Without DATABASE_URL the first start initialises a PostgreSQL cluster in .stepd/ (a few
seconds), later starts reuse it. Other commands run in the same folder find it; psql and other
services connect with the printed DATABASE_URL.

The first SIGINT/SIGTERM stops claiming and waits for running steps, then stops the embedded
PostgreSQL. A second one within 1.5 s is the copy of a Ctrl-C that npm forwards, and is ignored;
a later one exits at once, after stopping the embedded PostgreSQL (running steps are re-run by
the next start; the data stays intact).
Another \`stepd start\` in the same folder (with its own --executor-id) uses the embedded
PostgreSQL of the first; only the last one to stop stops it.`,
    )
    .action(async (flags: DaemonFlags) => {
      // The daemon's modules (executor, tools, MCP client) load here, so the other commands start fast.
      const [{ startDaemon }, { DaemonStartError }] = await Promise.all([import('../daemon/startDaemon.js'), import('../daemon/daemonStartError.js')]);
      let daemon: RunningDaemon;
      try {
        daemon = await startDaemon(flags, dataDirFrom(flags.dataDir));
      } catch (err) {
        throw err instanceof DaemonStartError ? startFailure(err) : err;
      }
      const running = daemon;
      // Ready is announced once the signal handlers are in place: a supervisor that signals as
      // soon as it reads the line must get a clean stop, not the default death by signal.
      const announceReady = () => {
        if (running.embeddedUrl) out(`stepd: embedded PostgreSQL ready — DATABASE_URL=${running.embeddedUrl}`);
        else out(`stepd: ready — executing workflows of schema ${running.schema} on ${redactUrl(running.url)}`);
        if (running.httpUrl) out(`stepd: dashboard at ${running.httpUrl}/ (MCP at ${running.httpUrl}/mcp, metrics at ${running.httpUrl}/metrics)`);
      };
      await waitForStop({
        stop: () => running.stop(),
        // A deliberate second signal: abandon the running steps but still stop the embedded PostgreSQL.
        ...(running.abort ? { abort: running.abort } : {}),
        log: running.log,
        listening: announceReady,
      });
    });
}

/** The daemon's start failures as the CLI words them: an unreachable database (or embedded PostgreSQL) exits 4. */
function startFailure(err: DaemonStartError): Error {
  if (err.stage === 'embedded') {
    return new CliError(`could not start the embedded PostgreSQL in ${err.where}: ${(err.cause as Error).message}\n  (or set DATABASE_URL to use your own PostgreSQL)`, EXIT.unreachable);
  }
  return isConnectionError(err.cause) ? new CliError(`cannot reach the database at ${redactUrl(err.where)}: ${(err.cause as Error).message}`, EXIT.unreachable) : toCliError(err.cause);
}
