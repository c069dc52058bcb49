import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EmbeddedPostgresError } from './embeddedPostgresError.js';
import { errCode } from './helpers.js';
import { processState } from './processes.js';

/**
 * One process at a time initialises or starts the server for a folder. The lock file names its
 * holder's pid and is made atomically (written aside, then linked into place); a lock whose
 * holder has died is taken over.
 */
export async function acquireStartLock(dataDir: string, timeoutMs: number): Promise<() => Promise<void>> {
  const file = path.join(dataDir, 'start.lock');
  const mine = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await fs.writeFile(mine, String(process.pid), { mode: 0o600 });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await fs.link(mine, file);
        return async () => {
          const holder = await fs.readFile(file, 'utf8').catch(() => '');
          if (holder === String(process.pid)) await fs.rm(file, { force: true });
        };
      } catch (err) {
        if (errCode(err) !== 'EEXIST') throw err;
      }
      const holder = Number(await fs.readFile(file, 'utf8').catch(() => ''));
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && (await processState(holder)) === 'gone') {
        await fs.rm(file, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new EmbeddedPostgresError(`Another process (pid ${holder}) has been starting the embedded PostgreSQL in ${dataDir} for too long. If it is gone, delete ${file}.`, {
          dataDir,
        });
      }
      await sleep(100);
    }
  } finally {
    await fs.rm(mine, { force: true });
  }
}
