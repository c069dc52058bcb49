/**
 * What a test gives the processes it starts: none of the user's stepd settings (env.ts), a working
 * folder of their own (so no stepd.config.json of the checkout or of the user is read), and temp
 * folders that are removed after the test file. test/globalSetup.ts removes the same settings from
 * the test workers themselves and fails the run when a stepd-* folder is left in the temp folder.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

export { cleanEnv, isUserSetting } from './env.js';

const made = new Set<string>();

afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  made.clear();
});

/**
 * A new empty folder in the temp folder, removed when the test file ends. World-enterable, like a
 * checkout: the embedded PostgreSQL runs as another OS user when the tests run as root.
 */
export function tempDirSync(prefix = 'stepd-test-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  chmodSync(dir, 0o755);
  made.add(dir);
  return dir;
}
