/**
 * A stepd.config.json in the checkout's root that no stepd accepts (an unknown key): a process
 * that reads it refuses to start, naming the file. The isolation test puts it there for a moment
 * to prove that nothing the tests start reads it; test/globalSetup.ts removes it should that test
 * be killed halfway. Never touches a stepd.config.json of the user's own.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

export const ROOT_CONFIG = fileURLToPath(new URL('../../stepd.config.json', import.meta.url));
const MARK = 'written by test/cli/isolation.test.ts: delete this file';

/** Writes the hostile file unless the root already holds a stepd.config.json; true when written. */
export async function writeHostileConfig(): Promise<boolean> {
  try {
    await writeFile(ROOT_CONFIG, `${JSON.stringify({ hostile: MARK, limits: { concurrency: 1 } }, null, 2)}\n`, { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'EEXIST') return false;
    throw err;
  }
}

/** Removes the file if it is the hostile one (never the user's own). */
export async function removeHostileConfig(): Promise<void> {
  const text = await readFile(ROOT_CONFIG, 'utf8').catch(() => '');
  if (text.includes(MARK)) await rm(ROOT_CONFIG, { force: true });
}
