/**
 * A daemon on an embedded PostgreSQL in a temp folder, started through one of its launchers (npm
 * start, npx, the bin), for the signal and Ctrl-C tests: one data directory per test file, the
 * embedded server stopped after each test, and the check that a stop left nothing running.
 */
import { access, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeAll, expect } from 'vitest';
import { stopEmbeddedPostgres } from '../../src/db/embedded.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { isAlive, postmasterPid, processesNaming, ROOT, spawnCli, type CliProcess } from './helpers.js';

export interface EmbeddedFolder {
  folder: string;
  dataDir: string;
  emptyConfig: string;
}

export interface RunningDaemon {
  proc: CliProcess;
  daemon: number;
  postmaster: number;
}

/** Registers the folder's setup and the embedded server's stop after each test; its fields are set in beforeAll. */
export function useEmbeddedFolder(prefix: string): EmbeddedFolder {
  const f: EmbeddedFolder = { folder: '', dataDir: '', emptyConfig: '' };
  beforeAll(async () => {
    f.folder = tempDirSync(prefix);
    f.dataDir = path.join(f.folder, '.stepd');
    f.emptyConfig = path.join(f.folder, 'empty.config.json');
    await writeFile(f.emptyConfig, '{}\n');
  });
  afterEach(async () => {
    await stopEmbeddedPostgres({ dataDir: f.dataDir, log: silentLogger() }).catch(() => undefined);
  });
  return f;
}

/** Runs `command` (which ends in `start`) on the folder's data directory; resolves once the daemon is ready, with its pid and its postmaster's. */
export async function startEmbeddedDaemon(f: EmbeddedFolder, command: string[], opts: { cwd?: string; executorId: string; detached?: boolean }): Promise<RunningDaemon> {
  const proc = spawnCli(['--config', f.emptyConfig, '--executor-id', opts.executorId, '--poll-interval', '100ms'], {
    command,
    cwd: opts.cwd ?? f.folder,
    env: { STEPD_DATA_DIR: f.dataDir, STEPD_LOG_LEVEL: 'info' },
    ...(opts.detached ? { detached: true } : {}),
  });
  await proc.waitFor(/^stepd: embedded PostgreSQL ready — DATABASE_URL=/m, 'stdout', 120_000);
  const started = await proc.waitFor(/"pid":(\d+),[^\n]*"msg":"executor started"/, 'stderr');
  const daemon = Number(started[1]);
  const postmaster = (await postmasterPid(f.dataDir))!;
  expect([await isAlive(daemon), await isAlive(postmaster)]).toEqual([true, true]);
  return { proc, daemon, postmaster };
}

/** Waits for the launcher to exit and checks that the daemon and its PostgreSQL stopped cleanly behind it. */
export async function expectStoppedCleanly(f: EmbeddedFolder, run: RunningDaemon) {
  const exit = await run.proc.exited;
  const gone = (pid: number, what: string) =>
    waitFor(async () => !(await isAlive(pid)), `${what} ${pid} to exit`, 60_000).catch((err: Error) => {
      throw new Error(`${err.message}; stderr:\n${run.proc.stderr}`);
    });
  await gone(run.daemon, 'daemon');
  await gone(run.postmaster, 'postmaster');
  expect(await processesNaming(f.dataDir)).toEqual([]);
  expect(run.proc.stderr).toContain('"msg":"embedded PostgreSQL stopped"');
  // A clean shutdown: no postmaster.pid left, the cluster in place.
  expect(await postmasterPid(f.dataDir)).toBeUndefined();
  await access(path.join(f.dataDir, 'pg', 'PG_VERSION'));
  return exit;
}

/** A project that depends on stepd, as a user's would (npx finds its bin; run npx with --no --offline: never the registry). */
export async function projectUsingStepd(f: EmbeddedFolder): Promise<string> {
  const project = path.join(f.folder, 'project');
  await mkdir(path.join(project, 'node_modules', '.bin'), { recursive: true });
  await writeFile(path.join(project, 'package.json'), '{"name": "uses-stepd", "version": "1.0.0", "private": true}\n');
  await symlink(ROOT, path.join(project, 'node_modules', 'stepd'));
  await symlink('../stepd/bin/stepd.js', path.join(project, 'node_modules', '.bin', 'stepd'));
  return project;
}
