/**
 * The zero-setup path of the README: `stepd start` in an empty folder without DATABASE_URL starts
 * an embedded PostgreSQL in .stepd/, prints its URL, and other commands in that folder use it.
 * Slow (initdb, server start), so it is one test.
 */
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { findEmbeddedPostgres, stopEmbeddedPostgres } from '../../src/db/embedded.js';
import { silentLogger } from '../../src/logger.js';
import { EXAMPLES, runCli, spawnCli, tempDir } from './helpers.js';

const dataDirs: string[] = [];

afterEach(async () => {
  for (const dataDir of dataDirs.splice(0)) await stopEmbeddedPostgres({ dataDir, log: silentLogger() }).catch(() => undefined);
});

async function count(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>('SELECT count(*)::int AS n FROM stepd.workflows')).rows[0]!.n;
  } finally {
    await client.end();
  }
}

describe('the embedded default', () => {
  it('starts from an empty folder, prints the URL, runs a workflow, stops cleanly; the next start reuses the data, also after a crash', { timeout: 180_000 }, async () => {
    const folder = await tempDir('stepd-embedded-cli-');
    const dataDir = path.join(folder, '.stepd');
    dataDirs.push(dataDir);

    const daemon = spawnCli(['start', '--poll-interval', '100ms'], { cwd: folder });
    const [line, url] = await daemon.waitFor(/^stepd: embedded PostgreSQL ready — DATABASE_URL=(postgres:\/\/\S+)$/m, 'stdout', 120_000);
    expect(daemon.stdout).toBe(`${line}\n`);
    expect(await count(url!)).toBe(0);

    const run = await runCli(['run', path.join(EXAMPLES, 'sequential.json'), '--follow'], { cwd: folder });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/workflow 1 completed/);

    const stopped = await daemon.kill('SIGTERM');
    expect(stopped.code).toBe(0);
    expect(await findEmbeddedPostgres(dataDir)).toBeNull();
    const afterStop = await runCli(['list'], { cwd: folder });
    expect(afterStop.code).toBe(4);
    expect(afterStop.stderr).toContain('npx stepd start');

    const again = spawnCli(['start'], { cwd: folder });
    const [, secondUrl] = await again.waitFor(/DATABASE_URL=(postgres:\/\/\S+)$/m, 'stdout', 120_000);
    // The same cluster and credentials; the port may differ if another process took it meanwhile.
    const withoutPort = (u: string) => u.replace(/:\d+\//, ':PORT/');
    expect(withoutPort(secondUrl!)).toBe(withoutPort(url!));
    const status = await runCli(['status', '1', '--json'], { cwd: folder });
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout).workflow).toMatchObject({ id: '1', name: 'sequential', status: 'completed' });

    // A crash of the daemon leaves the server and its data; the next start takes them over.
    expect((await again.kill('SIGKILL')).signal).toBe('SIGKILL');
    const third = spawnCli(['start'], { cwd: folder });
    await third.waitFor(/DATABASE_URL=/, 'stdout', 120_000);
    const afterCrash = await runCli(['list', '--json'], { cwd: folder });
    expect(JSON.parse(afterCrash.stdout)).toEqual([expect.objectContaining({ id: '1', status: 'completed' })]);
    expect((await third.kill('SIGINT')).code).toBe(0);
    expect(await findEmbeddedPostgres(dataDir)).toBeNull();
  });
});
