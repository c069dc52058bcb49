/**
 * `stepd run --follow` and `stepd watch` say when no executor is alive on the schema (issue 26:
 * against an orphaned database, --follow waited forever in silence), and go on once one runs.
 * Real CLI processes on a real schema; the executor's heartbeat rows decide.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, startExecutor, waitForWorkflow } from '../helpers/db.js';
import { envFor, spawnCli, writeJson } from './helpers.js';

const ECHO = { start: { name: 'hello', tool: 'core.echo', args: { hi: 1 }, done: true } };

describe('following without a live executor', () => {
  it('run --follow says no executor is alive, then finishes once one starts', { timeout: 60_000 }, async () => {
    const t = await createTestSchema();
    const flow = await writeJson(ECHO);
    const run = spawnCli(['run', flow, '--follow'], { env: envFor(t) });
    await run.waitFor(/no executor is alive on schema \S+ \(no executor has a heartbeat\): workflow \d+ waits until one runs; start one with: stepd start/, 'stderr');
    await startExecutor(t);
    const exit = await run.exited;
    expect(exit.code, exit.stderr).toBe(0);
    expect(exit.stdout).toMatch(/workflow \d+ completed/);
  });

  it('an executor that stopped beating counts as gone: watch ID says when its last heartbeat was', { timeout: 60_000 }, async () => {
    const t = await createTestSchema();
    const [{ id }] = await t.q(`INSERT INTO stepd.workflows (name, flow) VALUES ('w', $1) RETURNING id`, [JSON.stringify(ECHO)]);
    // A daemon killed without a clean stop leaves its row, beating no more.
    await t.q(
      `INSERT INTO stepd.executors (id, started_at, last_beat_at, host, pid, heartbeat_interval_ms, dead_after_ms)
       VALUES ('gone', now() - interval '1 hour', now() - interval '1 hour', 'h', 1, 1000, 15000)`,
    );
    const watch = spawnCli(['watch', String(id)], { env: envFor(t) });
    await watch.waitFor(/no executor is alive on schema \S+ \(the last heartbeat was at \S+\): workflow \d+ waits/, 'stderr');
    await startExecutor(t);
    await waitForWorkflow(t, String(id));
    const exit = await watch.exited;
    expect(exit.code, exit.stderr).toBe(0);
  });

  it('says nothing while an executor is alive', { timeout: 60_000 }, async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const r = await spawnCli(['run', await writeJson(ECHO), '--follow'], { env: envFor(t) }).exited;
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('no executor is alive');
  });
});
