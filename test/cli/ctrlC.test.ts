/**
 * One Ctrl-C, the way a terminal sends it: SIGINT to every process of the foreground job's
 * process group (npm and the daemon both get it), then npm forwards its own copy to the daemon.
 * The daemon must take the copy as a duplicate, stop gracefully and stop its embedded PostgreSQL:
 * nothing left running, no postmaster.pid. Real processes in their own group, judged by pids. A
 * deliberate second Ctrl-C later still exits at once, and still stops the embedded PostgreSQL.
 */
import { access, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stopEmbeddedPostgres } from '../../src/db/embedded.js';
import { silentLogger } from '../../src/logger.js';
import { DUPLICATE_SIGNAL_WINDOW_MS } from '../../src/cli/waitForStop.js';
import { waitFor } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { isAlive, postmasterPid, processesNaming, ROOT, spawnCli, type CliProcess } from './helpers.js';

const BIN = path.join(ROOT, 'bin', 'stepd.js');

let folder = '';
let dataDir = '';
let config = '';

beforeAll(async () => {
  folder = tempDirSync('stepd-ctrlc-');
  dataDir = path.join(folder, '.stepd');
  config = path.join(folder, 'empty.config.json');
  await writeFile(config, '{}\n');
});

afterEach(async () => {
  await stopEmbeddedPostgres({ dataDir, log: silentLogger() }).catch(() => undefined);
});

/** `command … start` in its own process group; resolves once it serves, with the daemon's and the postmaster's pids. */
async function startInGroup(command: string[], executorId: string, cwd?: string) {
  const proc = spawnCli(['--config', config, '--executor-id', executorId, '--poll-interval', '100ms'], {
    command,
    cwd: cwd ?? (command[0] === 'npm' ? ROOT : folder),
    env: { STEPD_DATA_DIR: dataDir, STEPD_LOG_LEVEL: 'info' },
    detached: true,
  });
  await proc.waitFor(/^stepd: embedded PostgreSQL ready — DATABASE_URL=/m, 'stdout', 120_000);
  const started = await proc.waitFor(/"pid":(\d+),[^\n]*"msg":"executor started"/, 'stderr');
  const daemon = Number(started[1]);
  const postmaster = (await postmasterPid(dataDir))!;
  expect([await isAlive(daemon), await isAlive(postmaster)]).toEqual([true, true]);
  return { proc, daemon, postmaster };
}

/** SIGINT to the whole group, then once more to the job's leader (npm, or the bin itself). */
function ctrlC(proc: CliProcess): void {
  process.kill(-proc.child.pid!, 'SIGINT');
  proc.child.kill('SIGINT');
}

async function expectAllGone(run: { proc: CliProcess; daemon: number; postmaster: number }) {
  const gone = (pid: number, what: string) =>
    waitFor(async () => !(await isAlive(pid)), `${what} ${pid} to exit`, 60_000).catch((err: Error) => {
      throw new Error(`${err.message}; stderr:\n${run.proc.stderr}`);
    });
  const exit = await run.proc.exited;
  await gone(run.daemon, 'daemon');
  await gone(run.postmaster, 'postmaster');
  expect(await processesNaming(dataDir)).toEqual([]);
  expect(await postmasterPid(dataDir)).toBeUndefined();
  expect(run.proc.stderr).toContain('"msg":"embedded PostgreSQL stopped"');
  await access(path.join(dataDir, 'pg', 'PG_VERSION'));
  return exit;
}

describe('one Ctrl-C stops the daemon and its embedded PostgreSQL', () => {
  it('npm start: SIGINT to the process group, then again to npm', { timeout: 180_000 }, async () => {
    const run = await startInGroup(['npm', 'start', '--'], 'ctrlc-npm');
    ctrlC(run.proc);
    const exit = await expectAllGone(run);
    expect(run.proc.stderr).toContain('ignoring a duplicate signal');
    expect(run.proc.stderr).not.toContain('second signal: exiting now');
    expect(exit.code).toBe(0);
  });

  it('node bin/stepd.js start: SIGINT to the process group, then again to the bin', { timeout: 180_000 }, async () => {
    const run = await startInGroup([process.execPath, BIN, 'start'], 'ctrlc-bin');
    ctrlC(run.proc);
    const exit = await expectAllGone(run);
    expect(exit.code).toBe(0);
  });

  it('npx stepd start: SIGINT to the process group, then again to npx', { timeout: 180_000 }, async () => {
    // A project that depends on stepd, as a user's would (npx finds its bin; --no and --offline: never the registry).
    const project = path.join(folder, 'project');
    await mkdir(path.join(project, 'node_modules', '.bin'), { recursive: true });
    await writeFile(path.join(project, 'package.json'), '{"name": "uses-stepd", "version": "1.0.0", "private": true}\n');
    await symlink(ROOT, path.join(project, 'node_modules', 'stepd'));
    await symlink('../stepd/bin/stepd.js', path.join(project, 'node_modules', '.bin', 'stepd'));
    const run = await startInGroup(['npx', '--no', '--offline', 'stepd', 'start'], 'ctrlc-npx', project);
    ctrlC(run.proc);
    await expectAllGone(run);
  });

  it('a deliberate second Ctrl-C later exits at once and still stops the embedded PostgreSQL', { timeout: 180_000 }, async () => {
    // A tool that never ends keeps the graceful stop waiting (shutdown grace: an hour).
    const run = await startInGroup([process.execPath, BIN, 'start', '--shutdown-grace', '1h'], 'ctrlc-twice');
    const url = run.proc.stdout.match(/DATABASE_URL=(\S+)/)![1]!;
    const flow = path.join(folder, 'sleep.json');
    await writeFile(flow, JSON.stringify({ start: { name: 'nap', tool: 'core.sleep', args: { ms: 3_600_000 }, done: true } }));
    const started = await spawnCli(['run', flow], { env: { DATABASE_URL: url } }).exited;
    expect(started.code, started.stderr).toBe(0);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await waitFor(async () => (await db.query("SELECT 1 FROM stepd.workflow_steps WHERE status = 'running'")).rowCount === 1, 'the step to run');
    } finally {
      await db.end();
    }
    process.kill(-run.proc.child.pid!, 'SIGINT');
    await run.proc.waitFor(/stopping \(send the signal again/, 'stderr');
    // Past the duplicate window: a person pressing Ctrl-C again (the step holds the graceful stop for an hour).
    await new Promise((r) => setTimeout(r, DUPLICATE_SIGNAL_WINDOW_MS + 500));
    expect(run.proc.running).toBe(true);
    process.kill(-run.proc.child.pid!, 'SIGINT');
    const exit = await expectAllGone(run);
    expect(run.proc.stderr).toContain('second signal: exiting now');
    expect(exit.code).toBe(130);
  });
});
