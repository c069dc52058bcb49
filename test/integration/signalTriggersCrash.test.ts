/**
 * Signal triggers with executors as real processes (the built CLI): two executors share the
 * database while senders burst signals, one is killed with SIGKILL mid-burst and restarted. The
 * database starts the workflows in the senders' transactions, so whatever the executors do,
 * every committed signal has exactly one workflow per trigger, and every one of them completes.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, waitFor, type TestSchema } from '../helpers/db.js';
import { killHard, spawnExecutor } from '../helpers/processes.js';

const NAP = { start: 'nap', steps: { nap: { tool: 'core.sleep', args: { ms: 300 }, timeout: '2s', retry: { initial: '50ms', max: '100ms' }, done: true, output: '{{input}}' } } };

const executorId = (t: TestSchema, name: string) => `exec-${name}-${t.schema}`;

/** Sends `count` signals, and goes on until `until()` holds (the kill), then 10 more. */
async function sendBurst(t: TestSchema, sender: number, count: number, until: () => boolean = () => true): Promise<void> {
  const conn = await t.db.connect();
  try {
    let after = 0;
    for (let i = 0; i < count || after < 10; i++) {
      if (i >= count && until()) after++;
      await conn.query(`INSERT INTO ${t.schema}.signals (name, key, payload) VALUES ('tick', $1, $2)`, [`${sender}-${i}`, JSON.stringify({ sender, i })]);
    }
  } finally {
    conn.release();
  }
}

describe('signal triggers under executor crashes', () => {
  it('2 executors and a SIGKILL mid-burst (then a restart): exactly one workflow per signal and trigger, all completed', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('nap', $1)`, [JSON.stringify(NAP)]);
    await t.q(`INSERT INTO stepd.triggers (name, signal, flow) VALUES ('a', 'tick', 'nap'), ('b', 'tick', 'nap')`);
    const a = await spawnExecutor(t, { executorId: executorId(t, 'a'), leaseGrace: '200ms' });
    await spawnExecutor(t, { executorId: executorId(t, 'b'), leaseGrace: '200ms' });

    let killed = false;
    const first = Promise.all([0, 1, 2].map((s) => sendBurst(t, s, 40, () => killed)));
    // Mid-burst: once executor a is running steps of triggered workflows, it dies.
    await waitFor(
      async () => (await t.q(`SELECT 1 FROM stepd.workflow_steps WHERE status = 'running' AND executor_id = $1 LIMIT 1`, [a.executorId]))[0],
      'executor a to run a triggered step',
    );
    await killHard(t, a);
    killed = true;
    await first;
    await spawnExecutor(t, { executorId: executorId(t, 'a'), leaseGrace: '200ms' });
    await Promise.all([3, 4].map((s) => sendBurst(t, s, 20)));

    const signals = await t.q<{ id: string }>(`SELECT id::text FROM stepd.signals ORDER BY id`);
    expect(signals.length).toBeGreaterThanOrEqual(3 * 40 + 3 * 10 + 2 * 20);
    const expected = signals.flatMap((s) => [`signal:a:${s.id}`, `signal:b:${s.id}`]).sort();
    const rows = await waitFor(
      async () => {
        const all = await t.q<{ key: string; status: string }>(`SELECT key, status FROM stepd.workflows ORDER BY key`);
        return all.length === expected.length && all.every((w) => w.status === 'completed') ? all : undefined;
      },
      'every triggered workflow to complete',
      60_000,
    );
    expect(rows.map((w) => w.key)).toEqual(expected);
    // The kill did land mid-step: a step of executor a was lost and ran again elsewhere.
    expect(await t.q(`SELECT count(*)::int > 0 AS lost FROM stepd.workflow_steps WHERE executor_id = $1 AND error->>'code' = 'lost'`, [a.executorId])).toEqual([{ lost: true }]);
  }, 90_000);
});
