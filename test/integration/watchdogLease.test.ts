/**
 * Watchdog leadership is a lease row (`watchdog` in executor_leases, sql/0018): an executor leads
 * only while no other executor holds an unexpired lease from a live session. A leader that is
 * frozen with its session open loses the lead when its lease runs out; one whose session ended
 * (SIGKILL, a PostgreSQL restart) loses it at once. The "other leader" here is a session of the
 * test (a trusted role, with a listener's application_name); sweeps are run by hand
 * (`executor.sweep()`), so nothing depends on timing.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const GATE = {
  start: 'approve',
  steps: { approve: { approval: { timeout: '1ms', onTimeout: 'approve' }, done: true } },
};

/** A session that holds the watchdog lease as executor `ghost` until `until` (an SQL expression). */
async function ghostLeader(t: TestSchema, until: string): Promise<pg.Client> {
  const ghost = new pg.Client({ connectionString: t.url, application_name: 'stepd-executor:ghost' });
  ghost.on('error', () => {});
  await ghost.connect();
  onCleanup(() => ghost.end().catch(() => {}));
  await ghost.query(
    `UPDATE ${t.schema}.executor_leases SET holder = 'ghost', session_pid = pg_backend_pid(),
            session_app = current_setting('application_name'), until = ${until} WHERE name = 'watchdog'`,
  );
  return ghost;
}

/** A gate whose timeout has passed: only the watchdog's leader handles it. */
async function expiredGate(t: TestSchema): Promise<string> {
  const id = await insertWorkflow(t, GATE);
  await waitFor(async () => {
    const rows = await t.q<{ due: boolean }>(`SELECT expires_at < now() AS due FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'pending'`, [id]);
    return rows[0]?.due === true;
  }, 'the gate to be pending past its timeout');
  return id;
}

const holder = async (t: TestSchema) => (await t.q<{ holder: string | null }>(`SELECT holder FROM stepd.executor_leases WHERE name = 'watchdog'`))[0]?.holder;

describe('the watchdog lease', () => {
  it('is respected while it runs and its session lives, and taken once it has run out', async () => {
    const t = await createTestSchema();
    await ghostLeader(t, `now() + interval '1 hour'`);
    const executor = await startExecutor(t, { executorId: 'follower' });
    const id = await expiredGate(t);
    await executor.sweep();
    expect(await holder(t)).toBe('ghost');
    expect((await getSteps(t, id)).map((s) => s.status)).toEqual(['pending']);

    // The ghost leader froze: its session is open, but it renews nothing and the lease runs out.
    await t.q(`UPDATE stepd.executor_leases SET until = now() - interval '1 second' WHERE name = 'watchdog'`);
    await executor.sweep();
    expect(await holder(t)).toBe('follower');
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });

  it("is taken at once when the leader's session has ended, though it has not run out", async () => {
    const t = await createTestSchema();
    const ghost = await ghostLeader(t, `now() + interval '1 hour'`);
    const executor = await startExecutor(t, { executorId: 'follower' });
    const id = await expiredGate(t);
    await executor.sweep();
    expect(await holder(t)).toBe('ghost');

    const [{ pid }] = (await ghost.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)).rows as [{ pid: number }];
    await ghost.end();
    await waitFor(async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE pid = $1`, [pid])).length === 0, 'the ghost session to end');
    await executor.sweep();
    expect(await holder(t)).toBe('follower');
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });
});
