import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/** The root logger: JSON lines on stderr (stdout is for command output). */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino({ name: options.name ?? 'stepd', level: options.level ?? process.env.STEPD_LOG_LEVEL ?? 'info' }, pino.destination(2));
}

/** A logger that drops everything (tests, quiet commands). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
