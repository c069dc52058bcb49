/**
 * Several `stepd start` in one folder share its embedded PostgreSQL: the process that started the
 * server owns it, a second one attaches, and no daemon ever stops a server another live daemon
 * uses. Real processes, judged by pids.
 */
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stopEmbeddedPostgres } from '../../src/db/embedded.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../helpers/db.js';
import { EXAMPLES, isAlive, postmasterPid, processesNaming, runCli, spawnCli, tempDir } from './helpers.js';

const dataDirs: string[] = [];

afterEach(async () => {
  for (const dataDir of dataDirs.splice(0)) await stopEmbeddedPostgres({ dataDir, log: silentLogger() }).catch(() => undefined);
});

const READY = /^stepd: embedded PostgreSQL ready — DATABASE_URL=(postgres:\/\/\S+)$/m;

function startIn(folder: string, executorId: string) {
  return spawnCli(['start', '--executor-id', executorId, '--poll-interval', '100ms'], { cwd: folder, env: { STEPD_LOG_LEVEL: 'info' } });
}

describe('two daemons in one folder', () => {
  it('a second start never stops the embedded PostgreSQL of the first; the last one to stop stops it', { timeout: 180_000 }, async () => {
    const folder = await tempDir('stepd-daemons-');
    const dataDir = path.join(folder, '.stepd');
    dataDirs.push(dataDir);

    const one = startIn(folder, 'one');
    const [, url] = await one.waitFor(READY, 'stdout', 120_000);
    const pm = (await postmasterPid(dataDir))!;
    expect(await isAlive(pm)).toBe(true);

    // Same executor id: refused, and the server of the first daemon keeps running.
    const clash = await runCli(['start', '--executor-id', 'one'], { cwd: folder });
    expect(clash.code).not.toBe(0);
    expect(await postmasterPid(dataDir)).toBe(pm);
    expect(await isAlive(pm)).toBe(true);
    expect((await runCli(['list'], { cwd: folder })).code).toBe(0);

    // Its own id: runs alongside on the same server; SIGINT stops it and leaves the server.
    const two = startIn(folder, 'two');
    const [, twoUrl] = await two.waitFor(READY, 'stdout', 120_000);
    expect(twoUrl).toBe(url);
    expect((await two.kill('SIGINT')).code).toBe(0);
    expect(two.stderr).toContain('embedded PostgreSQL left running: its owner still uses it');
    expect(await isAlive(pm)).toBe(true);
    expect((await runCli(['list'], { cwd: folder })).code).toBe(0);

    // The owner stops first: the server passes to the daemon still using it, which keeps working.
    const three = startIn(folder, 'three');
    await three.waitFor(READY, 'stdout', 120_000);
    expect((await one.kill('SIGTERM')).code).toBe(0);
    expect(one.stderr).toContain('embedded PostgreSQL left running: handed to another process that uses it');
    expect(await isAlive(pm)).toBe(true);
    const run = await runCli(['run', path.join(EXAMPLES, 'sequential.json'), '--follow'], { cwd: folder });
    expect([run.code, run.stderr]).toEqual([0, '']);
    expect(run.stdout).toMatch(/completed/);

    // The last one stops it: no postmaster, no process for the folder, the cluster intact.
    expect((await three.kill('SIGTERM')).code).toBe(0);
    await waitFor(async () => !(await isAlive(pm)), `postmaster ${pm} to exit`);
    expect(await processesNaming(dataDir)).toEqual([]);
    expect(await postmasterPid(dataDir)).toBeUndefined();
    await access(path.join(dataDir, 'pg', 'PG_VERSION'));
    expect(JSON.parse(await readFile(path.join(dataDir, 'server.json'), 'utf8'))).toMatchObject({ version: 1 });
  });
});
