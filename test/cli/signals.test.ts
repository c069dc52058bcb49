/**
 * What systemd, docker and supervisors do: signal the process they started, which is `npm start`,
 * `npx stepd start` or the `stepd` launcher rather than the daemon itself. The signal must reach
 * the daemon, which stops its embedded PostgreSQL, and nothing may be left running. Real
 * processes, judged by pids; one data directory for the file, so each start after the first also
 * proves that the previous stop left the cluster intact.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectStoppedCleanly, projectUsingStepd, startEmbeddedDaemon, useEmbeddedFolder, type RunningDaemon } from './embeddedDaemon.js';
import { postmasterPid, processesNaming, ROOT, spawnCli } from './helpers.js';

const BIN = path.join(ROOT, 'bin', 'stepd.js');
const NODE22_CACHE = 'stepd-node22';

const f = useEmbeddedFolder('stepd-signals-');

/** A `node` older than 22 on PATH (outside the Node 22 cache), to run bin/stepd.js as its launcher; undefined when there is none. */
function olderNode(): string | undefined {
  const PATH = (process.env.PATH ?? '').split(path.delimiter).filter((dir) => !dir.includes(NODE22_CACHE));
  const found = spawnSync('sh', ['-c', 'command -v node && node -p process.versions.node'], { env: { ...process.env, PATH: PATH.join(path.delimiter) }, encoding: 'utf8' });
  const [file, version] = found.stdout.trim().split('\n');
  return found.status === 0 && file && Number(version?.split('.')[0]) < 22 ? file : undefined;
}

function startDaemon(command: string[], opts: { cwd?: string; executorId: string }) {
  return startEmbeddedDaemon(f, command, opts);
}

/** Sends `signal` to the outer process only and checks that the daemon stopped cleanly behind it. */
async function signalAndCheck(run: RunningDaemon, signal: NodeJS.Signals) {
  run.proc.child.kill(signal);
  return expectStoppedCleanly(f, run);
}

describe('signals reach the daemon through its launchers', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`npm start: ${signal} to npm stops the daemon and its PostgreSQL`, { timeout: 180_000 }, async () => {
      const run = await startDaemon(['npm', 'start', '--'], { cwd: ROOT, executorId: `npm-${signal}` });
      const exit = await signalAndCheck(run, signal);
      expect(exit.code).toBe(0);
    });

    it(`node bin/stepd.js start: ${signal} stops the daemon and its PostgreSQL`, { timeout: 180_000 }, async () => {
      const run = await startDaemon([process.execPath, BIN, 'start'], { executorId: `bin-${signal}` });
      expect(run.daemon).toBe(run.proc.child.pid);
      const exit = await signalAndCheck(run, signal);
      expect(exit.code).toBe(0);
    });
  }

  it('a signal sent the moment the ready line appears still gets a clean stop', { timeout: 180_000 }, async () => {
    for (let i = 0; i < 5; i++) {
      const proc = spawnCli(['start', '--config', f.emptyConfig, '--executor-id', `eager-${i}`], { env: { STEPD_DATA_DIR: f.dataDir } });
      proc.child.stdout!.on('data', (chunk: Buffer) => {
        if (chunk.toString('utf8').includes('DATABASE_URL=')) proc.child.kill('SIGTERM');
      });
      const exit = await proc.exited;
      expect({ i, code: exit.code, signal: exit.signal }).toEqual({ i, code: 0, signal: null });
      expect(await postmasterPid(f.dataDir)).toBeUndefined();
    }
    expect(await processesNaming(f.dataDir)).toEqual([]);
  });

  const oldNode = olderNode();
  describe.runIf(oldNode)('on a node older than 22, bin/stepd.js runs the CLI with Node 22 as its child', () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      it(`forwards ${signal}`, { timeout: 180_000 }, async () => {
        const run = await startDaemon([oldNode!, BIN, 'start'], { executorId: `old-${signal}` });
        expect(run.daemon).not.toBe(run.proc.child.pid);
        const exit = await signalAndCheck(run, signal);
        expect(exit.code).toBe(0);
      });
    }

    it('stops the CLI when the launcher itself is killed (SIGKILL)', { timeout: 180_000 }, async () => {
      const run = await startDaemon([oldNode!, BIN, 'start'], { executorId: 'old-kill' });
      const exit = await signalAndCheck(run, 'SIGKILL');
      expect(exit.signal).toBe('SIGKILL');
    });
  });

  it('npx stepd start: SIGTERM to npx stops the daemon behind the shell npm runs it through', { timeout: 180_000 }, async () => {
    const project = await projectUsingStepd(f);

    const run = await startDaemon(['npx', '--no', '--offline', 'stepd', 'start'], { cwd: project, executorId: 'npx-SIGTERM' });
    await signalAndCheck(run, 'SIGTERM');
  });
});
