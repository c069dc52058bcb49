import { pino, type DestinationStream, type Logger } from 'pino';
import type { Secrets } from './secrets.js';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level?: string;
  name?: string;
  /**
   * Values that must never be written (the config's `${VAR}` values). Every finished line is
   * redacted, so messages, bindings of child loggers, `err.message`, `err.stack` and causes are
   * all covered, and values added to `secrets` later apply from then on.
   */
  secrets?: Secrets;
  /** Where the JSON lines go (default: stderr; stdout is for command output). */
  destination?: DestinationStream;
}

/** The root logger: JSON lines on stderr, with the secrets redacted. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const destination = options.destination ?? pino.destination(2);
  const stream = options.secrets ? redactingStream(destination, options.secrets) : destination;
  return pino({ name: options.name ?? 'stepd', level: options.level ?? process.env.STEPD_LOG_LEVEL ?? 'info' }, stream);
}

/**
 * A destination that replaces every secret in each line before passing it on. A line holding a
 * secret is parsed and redacted string by string, so it stays valid JSON even when a secret
 * looks like a number or a keyword; a line that is not JSON is redacted as text.
 */
export function redactingStream(destination: DestinationStream, secrets: Secrets): DestinationStream {
  return {
    write(line: string) {
      if (secrets.size === 0 || !secrets.appearsIn(line)) return destination.write(line);
      let clean: string;
      try {
        clean = `${JSON.stringify(secrets.redactValue(JSON.parse(line) as unknown))}\n`;
      } catch {
        clean = secrets.redact(line);
      }
      return destination.write(clean);
    },
  };
}

/** A logger that drops everything (tests, quiet commands). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
