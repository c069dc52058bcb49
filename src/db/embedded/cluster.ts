/** The cluster on disk: the data directory and initdb. */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../../errors.js';
import type { Context } from './context.js';
import { errMessage } from './helpers.js';
import { makeDirectories } from './makeDirectories.js';
import { explainFailure, run } from './programs.js';
import { type State, writeState } from './state.js';

const SUPERUSER = 'postgres';

export async function makeDataDir(dataDir: string): Promise<void> {
  try {
    await makeDirectories(dataDir);
    await fs.access(dataDir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    throw new ConfigError(`Cannot use ${dataDir} for the embedded PostgreSQL (${errMessage(err)}). Choose another data directory or set DATABASE_URL.`);
  }
}

/** initdb into a temporary directory that is renamed into place, so a half-made cluster is never taken for a real one. */
export async function initCluster(ctx: Context): Promise<State> {
  const { dataDir, pgdata, runAs, log } = ctx;
  const state: State = {
    version: 1,
    user: SUPERUSER,
    password: randomBytes(18).toString('base64url'),
    database: ctx.database,
    url: null,
    port: null,
    pid: null,
  };
  await writeState(dataDir, state);
  const tmp = `${pgdata}.init`;
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { mode: 0o700 });
  const pwfile = path.join(dataDir, `.pwfile-${randomBytes(6).toString('hex')}`);
  await fs.writeFile(pwfile, `${state.password}\n`, { mode: 0o600 });
  if (runAs) {
    await fs.chown(tmp, runAs.uid, runAs.gid);
    await fs.chown(pwfile, runAs.uid, runAs.gid);
  }
  log.info({ dataDir, osUser: runAs?.name }, 'initialising embedded PostgreSQL cluster');
  try {
    const result = await run(ctx, ctx.bins.initdb, [
      `--pgdata=${tmp}`,
      `--username=${SUPERUSER}`,
      `--pwfile=${pwfile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--no-locale',
      '--no-instructions',
    ]);
    if (result.code !== 0) {
      throw await explainFailure(ctx, 'initdb failed to create the embedded PostgreSQL cluster', result.output);
    }
  } finally {
    await fs.rm(pwfile, { force: true });
  }
  await fs.rename(tmp, pgdata);
  return state;
}
