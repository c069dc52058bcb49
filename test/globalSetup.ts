/**
 * Runs once around a vitest run, before any test worker starts:
 *
 * - The user's stepd settings (DATABASE_URL, STEPD_* and PG*; see helpers/isolation.ts) are removed
 *   from the environment the workers inherit, so no test reads them unless it sets them itself.
 * - The workers, and everything they start, get a private temp folder (TMPDIR). At the end, a
 *   stepd-* entry left in it is a test that did not clean up after itself: the run fails naming
 *   it. The folder is removed either way, so nothing is left in the system temp folder.
 */
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isUserSetting } from './helpers/env.js';
import { removeHostileConfig } from './helpers/hostileConfig.js';

export default async function setup(): Promise<() => Promise<void>> {
  for (const name of Object.keys(process.env)) if (isUserSetting(name)) delete process.env[name];
  const dir = await mkdtemp(path.join(os.tmpdir(), 'vitest-of-stepd-'));
  // The embedded PostgreSQL of a test runs as another OS user when the tests run as root.
  await chmod(dir, 0o755);
  process.env.TMPDIR = dir;

  return async () => {
    // A worker killed in the middle of the isolation test must not leave its file in the checkout.
    await removeHostileConfig();
    const left = (await readdir(dir)).filter((name) => name.startsWith('stepd-'));
    await rm(dir, { recursive: true, force: true });
    if (left.length > 0) {
      throw new Error(
        `The tests left ${left.length} stepd-* folder(s) in the temp folder (removed now): ${left.sort().join(', ')}. ` +
          'Whatever creates them must remove them when its test ends (see test/helpers/isolation.ts tempDirSync).',
      );
    }
  };
}
