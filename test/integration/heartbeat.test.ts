/**
 * Executor heartbeats: the steps of an executor that stopped beating are rescued by the leader
 * whatever their lease; an executor that was only frozen and comes back cannot record its late
 * outcome and aborts the step; a clean stop deregisters. Asserted on rows, never on durations.
 */
import { describe, expect, it } from 'vitest';
import { executorOptionsFrom } from '../../src/config.js';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, type TestSchema } from '../helpers/db.js';
import { killHard, spawnExecutor } from '../helpers/processes.js';

const FAST_BEATS = ['--heartbeat-interval', '100ms', '--dead-after', '1s'];
const retry = { maxAttempts: 3, initial: '10ms', max: '20ms' };
/** One step that runs far longer than the test, with a lease to match (10 minutes). */
const LONG = { start: 'long', steps: { long: { tool: 'core.sleep', args: { ms: 600_000 }, timeout: '10m', retry } } };

interface Row {
  id: string;
  attempt: number;
  status: string;
  executor_id: string | null;
  error: { code: string; details?: { executorId?: string } } | null;
  lease_until: Date | null;
  completed_at: Date | null;
}

const attempts = (t: TestSchema, workflowId: string) =>
  t.q<Row>(`SELECT id, attempt, status, executor_id, error, lease_until, completed_at FROM stepd.workflow_steps WHERE workflow_id = $1 ORDER BY attempt`, [
    workflowId,
  ]);

const executorIds = async (t: TestSchema) => (await t.q<{ id: string }>(`SELECT id FROM stepd.executors ORDER BY id`)).map((r) => r.id);

describe('executor heartbeats', () => {
  it("rescues a killed executor's running step before its lease runs out, from another executor id", async () => {
    const t = await createTestSchema();
    const a = await spawnExecutor(t, { executorId: 'hb-a', extraArgs: FAST_BEATS });
    const id = await insertWorkflow(t, LONG);
    const [first] = await waitFor(async () => {
      const rows = await attempts(t, id);
      return rows[0]?.status === 'running' ? rows : undefined;
    }, 'the step to run on hb-a', 45_000); // a process start, under the full suite's load
    expect(first!.executor_id).toBe('hb-a');
    const leaseFarAhead = await t.q<{ ok: boolean }>(`SELECT $1::timestamptz > now() + interval '5 minutes' AS ok`, [first!.lease_until]);
    expect(leaseFarAhead[0]!.ok).toBe(true);

    await killHard(t, a);
    await startExecutor(t, { executorId: 'hb-b', heartbeatIntervalMs: 100, deadAfterMs: 1_000 });

    const rows = await waitFor(async () => {
      const r = await attempts(t, id);
      return r[1]?.status === 'running' ? r : undefined;
    }, 'the step to be rescued and retried on hb-b', 45_000);
    expect(rows[0]).toMatchObject({ attempt: 1, status: 'failed', error: { code: 'lost', details: { executorId: 'hb-a' } } });
    expect(rows[1]).toMatchObject({ attempt: 2, status: 'running', executor_id: 'hb-b' });
    // Rescued because hb-a stopped beating, not because the lease ran out.
    expect(rows[0]!.completed_at!.getTime()).toBeLessThan(first!.lease_until!.getTime());
    // hb-a has nothing left running: the leader forgets it.
    await waitFor(async () => (await executorIds(t)).join() === 'hb-b', 'hb-a to be forgotten');
  });

  it('fences off an executor presumed dead that comes back: its late outcome is not recorded and it aborts the step', async () => {
    const t = await createTestSchema();
    const a = await spawnExecutor(t, { executorId: 'hb-a', extraArgs: FAST_BEATS });
    const id = await insertWorkflow(t, LONG);
    await waitFor(async () => (await attempts(t, id))[0]?.executor_id === 'hb-a', 'the step to run on hb-a');
    const stepId = (await attempts(t, id))[0]!.id;
    await startExecutor(t, { executorId: 'hb-b', heartbeatIntervalMs: 100, deadAfterMs: 1_000 });

    // hb-a freezes, and its session (with the watchdog leadership) is dropped, as a network
    // partition would: hb-b becomes the leader.
    a.signal('SIGSTOP');
    await t.q(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'stepd-executor:hb-a'`);
    await waitFor(async () => (await attempts(t, id))[1]?.status === 'running', 'the step to be rescued while hb-a is frozen');
    await waitFor(async () => !(await executorIds(t)).includes('hb-a'), 'hb-a to be forgotten');
    a.signal('SIGCONT');

    await a.waitForLog('this executor was presumed dead (no beat within dead-after); its running steps were rescued');
    await a.waitForLog('aborting running step', (l) => l.stepId === stepId);
    // The aborted attempt's outcome reached the database and was dropped by the fence.
    await a.waitForLog('step failed', (l) => l.stepId === stepId);
    await waitFor(async () => (await executorIds(t)).join() === 'hb-a,hb-b', 'hb-a to register again');
    const rows = await attempts(t, id);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ status: 'failed', error: { code: 'lost', details: { executorId: 'hb-a' } } });
    expect(rows[1]).toMatchObject({ status: 'running', executor_id: 'hb-b' });
  });

  it('registers while running and deregisters on a clean stop', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t, { executorId: 'hb-clean', heartbeatIntervalMs: 50, deadAfterMs: 1_000 });
    const [row] = await t.q<{ pid: number; host: string; dead_after_ms: number; beat_after_start: boolean }>(
      `SELECT pid, host, dead_after_ms, last_beat_at >= started_at AS beat_after_start FROM stepd.executors WHERE id = 'hb-clean'`,
    );
    expect(row).toMatchObject({ pid: process.pid, dead_after_ms: 1_000, beat_after_start: true });
    const before = (await t.q<{ at: Date }>(`SELECT last_beat_at AS at FROM stepd.executors WHERE id = 'hb-clean'`))[0]!.at;
    await waitFor(
      async () => (await t.q<{ at: Date }>(`SELECT last_beat_at AS at FROM stepd.executors WHERE id = 'hb-clean'`))[0]!.at > before,
      'a beat',
    );
    await executor.stop();
    expect(await executorIds(t)).toEqual([]);
  });

  it('reads --heartbeat-interval and --dead-after (or STEPD_*) and refuses a dead-after shorter than two beats', () => {
    const env = { STEPD_HEARTBEAT_INTERVAL: '1s', STEPD_DEAD_AFTER: '5s' };
    expect(executorOptionsFrom({}, 'postgres://x', env)).toMatchObject({ heartbeatIntervalMs: 1_000, deadAfterMs: 5_000 });
    expect(executorOptionsFrom({ deadAfter: '30s' }, 'postgres://x', env)).toMatchObject({ deadAfterMs: 30_000 });
    expect(executorOptionsFrom({}, 'postgres://x', {})).toMatchObject({ heartbeatIntervalMs: 2_000, deadAfterMs: 15_000 });
    expect(() => executorOptionsFrom({ heartbeatInterval: '2s', deadAfter: '3s' }, 'postgres://x', {})).toThrow(/deadAfterMs: must be at least twice the heartbeat interval/);
  });
});
