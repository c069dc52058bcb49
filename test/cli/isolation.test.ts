/**
 * The tests never hand the user's settings to what they start: with a stepd.config.json in the
 * checkout (as the README suggests) and DATABASE_URL / STEPD_* / PG* variables set around them,
 * the daemons and commands started by every spawning helper behave exactly as without them.
 */
import { readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestSchema, onCleanup, waitForWorkflow, insertWorkflow } from '../helpers/db.js';
import { removeHostileConfig, ROOT_CONFIG, writeHostileConfig } from '../helpers/hostileConfig.js';
import { spawnExecutor } from '../helpers/processes.js';
import { spawnStepd, waitForLog } from '../tools/stepdProcess.js';
import { envFor, EXAMPLES, ROOT, runCli, spawnCli } from './helpers.js';

const HOSTILE_ENV: Record<string, string> = {
  DATABASE_URL: 'postgres://hostile@127.0.0.1:1/hostile',
  STEPD_SCHEMA: 'hostile',
  STEPD_DATA_DIR: '/nonexistent/hostile',
  STEPD_CONCURRENCY: 'hostile',
  STEPD_LOG_LEVEL: 'silent',
  PGHOST: '192.0.2.1',
};

/** Sets the hostile variables in this test worker, as a user's shell would, until the test ends. */
function setHostileEnv(): void {
  const saved = Object.fromEntries(Object.keys(HOSTILE_ENV).map((name) => [name, process.env[name]]));
  Object.assign(process.env, HOSTILE_ENV);
  onCleanup(async () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
}

/** The working folder and the environment variables of a running process, from /proc. */
async function seenBy(pid: number): Promise<{ cwd: string; env: Map<string, string> }> {
  const cwd = await readlink(`/proc/${pid}/cwd`);
  const environ = await readFile(`/proc/${pid}/environ`, 'utf8');
  const env = new Map(
    environ
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as [string, string]),
  );
  return { cwd, env };
}

async function expectIsolated(pid: number): Promise<void> {
  const { cwd, env } = await seenBy(pid);
  expect(path.resolve(cwd)).not.toBe(path.resolve(ROOT));
  await expect(readFile(path.join(cwd, 'stepd.config.json'))).rejects.toMatchObject({ code: 'ENOENT' });
  for (const [name, value] of Object.entries(HOSTILE_ENV)) expect(env.get(name), name).not.toBe(value);
}

describe('isolation of what the tests start', () => {
  it('a stepd.config.json in the checkout and the user\'s DATABASE_URL, STEPD_* and PG* change nothing', { timeout: 120_000 }, async () => {
    const t = await createTestSchema();
    setHostileEnv();
    const wrote = await writeHostileConfig();
    onCleanup(removeHostileConfig);

    if (wrote) {
      // The file has teeth: a daemon started in the checkout reads it and refuses to start.
      const inCheckout = await runCli(['start', '--database-url', t.url, '--schema', t.schema], { cwd: ROOT });
      expect(inCheckout.code).toBe(1);
      expect(inCheckout.stderr).toContain(ROOT_CONFIG);
    }

    const executor = await spawnExecutor(t, { executorId: `iso-a-${t.schema}` });
    const daemon = spawnStepd(['start', '--database-url', t.url, '--schema', t.schema, '--executor-id', `iso-b-${t.schema}`, '--poll-interval', '50ms']);
    onCleanup(async () => void (await daemon.stop()));
    await waitForLog(daemon, 'executor started');
    const cli = spawnCli(['start', '--executor-id', `iso-c-${t.schema}`, '--poll-interval', '50ms'], { env: envFor(t) });
    await cli.waitFor(/^stepd: ready/m);

    for (const pid of [executor.child.pid!, daemon.child.pid!, cli.child.pid!]) await expectIsolated(pid);

    // And the results are those of a clean run: every workflow completes on the test schema.
    const ids = await Promise.all(Array.from({ length: 6 }, () => insertWorkflow(t, { start: 's', steps: { s: { tool: 'core.echo', args: { ok: true }, done: true } } })));
    for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
    const run = await runCli(['run', path.join(EXAMPLES, 'sequential.json'), '--follow'], { env: envFor(t) });
    expect([run.code, run.stderr]).toEqual([0, '']);
  });
});
