/**
 * The embedded data directory is made by makeDirectories, not `fs.mkdir(…, { recursive: true })`:
 * Node's recursive mkdir loops for ever, burning CPU, on a path whose parent exists but refuses
 * new entries with ENOENT (`/proc/nope`), which made `stepd start --data-dir /proc/nope` hang.
 */
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDataDir } from '../../src/db/embedded/cluster.js';
import { makeDirectories } from '../../src/db/embedded/makeDirectories.js';

const made: string[] = [];
afterEach(async () => {
  for (const dir of made.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function temp(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'stepd-mkdir-'));
  made.push(dir);
  return dir;
}

describe('makeDirectories', () => {
  it('makes the missing folders of a path, and is a no-op on one that exists', async () => {
    const root = await temp();
    const deep = path.join(root, 'a', 'b', 'c');
    await makeDirectories(deep);
    expect((await stat(deep)).isDirectory()).toBe(true);
    await makeDirectories(deep);
    await makeDirectories(root);
  });

  it('fails at once, naming the folder, where the parent exists but refuses new entries (/proc)', { timeout: 5_000 }, async () => {
    await expect(makeDirectories('/proc/nope')).rejects.toThrow(/\/proc\/nope/);
    await expect(makeDirectories('/proc/nope/deeper/still')).rejects.toThrow(/\/proc\/nope/);
  });

  it('fails where a file stands in the way', async () => {
    const root = await temp();
    const file = path.join(root, 'file');
    await writeFile(file, 'x');
    await expect(makeDirectories(file)).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(makeDirectories(path.join(file, 'below'))).rejects.toMatchObject({ code: 'ENOTDIR' });
  });
});

describe('makeDataDir', () => {
  it('refuses an unusable data directory at once with the directory and the reason', { timeout: 5_000 }, async () => {
    await expect(makeDataDir('/proc/nope')).rejects.toThrow(/^Cannot use \/proc\/nope for the embedded PostgreSQL \(.*no such file or directory.*\)/);
  });
});
