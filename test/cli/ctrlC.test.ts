/**
 * One Ctrl-C, the way a terminal sends it: SIGINT to every process of the foreground job's
 * process group (npm and the daemon both get it), then npm forwards its own copy to the daemon.
 * The daemon must take the copy as a duplicate, stop gracefully and stop its embedded PostgreSQL:
 * nothing left running, no postmaster.pid. Real processes in their own group, judged by pids. A
 * deliberate second Ctrl-C later still exits at once, and still stops the embedded PostgreSQL.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DUPLICATE_SIGNAL_WINDOW_MS } from '../../src/waitForStop.js';
import { waitFor } from '../helpers/db.js';
import { expectStoppedCleanly, projectUsingStepd, startEmbeddedDaemon, useEmbeddedFolder } from './embeddedDaemon.js';
import { ROOT, spawnCli, type CliProcess } from './helpers.js';

const BIN = path.join(ROOT, 'bin', 'stepd.js');
const f = useEmbeddedFolder('stepd-ctrlc-');

/** `command … start` in its own process group (as a terminal's foreground job). */
function startInGroup(command: string[], executorId: string, cwd?: string) {
  return startEmbeddedDaemon(f, command, { executorId, detached: true, cwd: cwd ?? (command[0] === 'npm' ? ROOT : f.folder) });
}

/**
 * SIGINT to the whole group, then, once the daemon is stopping, once more to the job's leader
 * (npm, npx, or the bin itself), as npm forwards its copy. Sent at the same instant, the kernel
 * may merge the two while both are pending; sent after the first was handled, it is a second
 * delivery, which the daemon must not take as "exit now".
 */
async function ctrlC(proc: CliProcess): Promise<void> {
  process.kill(-proc.child.pid!, 'SIGINT');
  await proc.waitFor(/stopping \(send the signal again/, 'stderr');
  proc.child.kill('SIGINT');
}

describe('one Ctrl-C stops the daemon and its embedded PostgreSQL', () => {
  it('npm start: SIGINT to the process group, then again to npm', { timeout: 180_000 }, async () => {
    const run = await startInGroup(['npm', 'start', '--'], 'ctrlc-npm');
    await ctrlC(run.proc);
    const exit = await expectStoppedCleanly(f, run);
    expect(run.proc.stderr).toContain('ignoring a duplicate signal');
    expect(run.proc.stderr).not.toContain('second signal: exiting now');
    expect(exit.code).toBe(0);
  });

  it('node bin/stepd.js start: SIGINT to the process group, then again to the bin', { timeout: 180_000 }, async () => {
    const run = await startInGroup([process.execPath, BIN, 'start'], 'ctrlc-bin');
    await ctrlC(run.proc);
    const exit = await expectStoppedCleanly(f, run);
    expect(run.proc.stderr).toContain('ignoring a duplicate signal');
    expect(exit.code).toBe(0);
  });

  it('npx stepd start: SIGINT to the process group, then again to npx', { timeout: 180_000 }, async () => {
    const project = await projectUsingStepd(f);
    const run = await startInGroup(['npx', '--no', '--offline', 'stepd', 'start'], 'ctrlc-npx', project);
    await ctrlC(run.proc);
    await expectStoppedCleanly(f, run);
  });

  it('a deliberate second Ctrl-C later exits at once and still stops the embedded PostgreSQL', { timeout: 180_000 }, async () => {
    // A tool that never ends keeps the graceful stop waiting (shutdown grace: an hour).
    const run = await startInGroup([process.execPath, BIN, 'start', '--shutdown-grace', '1h'], 'ctrlc-twice');
    const url = run.proc.stdout.match(/DATABASE_URL=(\S+)/)![1]!;
    const flow = path.join(f.folder, 'sleep.json');
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
    const exit = await expectStoppedCleanly(f, run);
    expect(run.proc.stderr).toContain('second signal: exiting now');
    expect(exit.code).toBe(130);
  });
});
