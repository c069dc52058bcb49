/** `stepd start`: migrate, then run the executor until SIGINT/SIGTERM. */
import type { Command } from 'commander';
import { databaseUrlFrom, executorOptionsFrom, type StartFlags } from '../config.js';
import { migrate } from '../db/migrate.js';
import { Executor } from '../executor/executor.js';
import { createLogger } from '../logger.js';
import { buildToolbox, loadToolConfig, probeMcpServers } from '../tools/toolbox.js';

export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run the executor daemon (applies migrations first)')
    .option('--database-url <url>', 'PostgreSQL URL (default: $DATABASE_URL)')
    .option('--schema <name>', 'schema holding the tables (default: $STEPD_SCHEMA or stepd)')
    .option('--executor-id <id>', 'this executor\'s identity; unique per running executor (default: host name)')
    .option('--concurrency <n>', 'steps run at once (default: 32)')
    .option('--poll-interval <duration>', 'fallback poll when no wake-up arrives (default: 1s)')
    .option('--watchdog-interval <duration>', 'how often stuck steps, gate and workflow deadlines are checked (default: 5s)')
    .option('--lease-grace <duration>', 'added to a step\'s timeout before the watchdog rescues it (default: 30s)')
    .option('--shutdown-grace <duration>', 'how long a stop waits for running steps (default: 30s)')
    .option('--config <path>', 'configuration file: MCP servers, permissions, limits (default: ./stepd.config.json if present)')
    .option('--no-events', 'do not NOTIFY lifecycle events on stepd_events')
    .addHelpText(
      'after',
      `
Examples:
  DATABASE_URL=postgres://localhost/app stepd start
  stepd start --database-url postgres://localhost/app --concurrency 64 --schema jobs

The first SIGINT/SIGTERM stops claiming and waits for running steps; a second one exits at once.`,
    )
    .action(async (flags: StartFlags & { config?: string }) => {
      const log = createLogger();
      const url = databaseUrlFrom(flags.databaseUrl);
      if (!url) throw new Error('no database: set DATABASE_URL or pass --database-url');
      const file = await loadToolConfig(flags.config);
      const toolbox = buildToolbox(file.config, file.path, log);
      const limitConcurrency = toolbox.limits.concurrency;
      const options = executorOptionsFrom(
        { ...flags, ...(flags.concurrency === undefined && limitConcurrency !== undefined ? { concurrency: String(limitConcurrency) } : {}) },
        url,
      );
      const migrated = await migrate({ url, schema: options.schema, log });
      log.info({ schema: options.schema, applied: migrated.applied.length }, 'schema ready');
      if (file.path) log.info({ config: file.path, mcpServers: toolbox.mcp.map((p) => p.prefix) }, 'configuration loaded');
      if (toolbox.permissions.allowsEverything) log.info({}, 'no permissions configured: every user may call every tool');
      await probeMcpServers(toolbox, log);
      const executor = new Executor(options, { log, tools: toolbox.registry, permissions: toolbox.permissions, limits: toolbox.limits });
      await executor.start();
      await waitForStop(async () => {
        await executor.stop();
        await toolbox.registry.close();
      }, log);
    });
}

/** First signal: graceful stop; second: exit at once. */
export function waitForStop(stop: () => Promise<void>, log: { info: (o: object, m: string) => void; error: (o: object, m: string) => void }): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.info({ signal }, 'second signal: exiting now');
        process.exit(130);
      }
      stopping = true;
      log.info({ signal }, 'stopping (send the signal again to exit at once)');
      stop().then(
        () => resolve(),
        (err: unknown) => {
          log.error({ err }, 'error while stopping');
          process.exitCode = 1;
          resolve();
        },
      );
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
