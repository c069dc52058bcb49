/**
 * A signal's wake-up (sql/0036): the transaction that readies a wait NOTIFYs at commit only when
 * no other signal wait is on its way to an executor; a skipped one is found by the executor's
 * lookout after claiming signal waits (src/executor/claims/reportLookout.ts), not by the poll.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { asExecutor, createTestSchema, onCleanup, startExecutor, waitFor, type TestSchema } from '../helpers/db.js';

const FLOW = {
  start: 'paid',
  steps: {
    paid: { signal: { name: 'payment', key: '{{input.order}}' }, next: 'ship' },
    ship: { tool: 'core.noop', done: true },
  },
};

/** Counts this schema's stepd_wakeup NOTIFYs; `settle` returns those delivered since the last settle. */
async function wakeupCounter(t: TestSchema): Promise<{ settle: () => Promise<number> }> {
  const listener = new pg.Client({ connectionString: t.url });
  await listener.connect();
  onCleanup(() => listener.end());
  const seen: string[] = [];
  listener.on('notification', (n) => {
    if (n.channel === 'stepd_wakeup' && n.payload?.includes(`"${t.schema}"`)) seen.push(n.payload);
  });
  await listener.query('LISTEN stepd_wakeup');
  let fence = 0;
  let counted = 0;
  return {
    // Notifications arrive in commit order: once our own fence arrives, every earlier one has.
    async settle() {
      const mark = `fence-${t.schema}-${++fence}`;
      await t.q(`SELECT pg_notify('stepd_wakeup', $1)`, [JSON.stringify({ schema: t.schema, mark })]);
      await waitFor(() => seen.some((p) => p.includes(mark)), `the fence ${mark}`);
      const wakeups = seen.filter((p) => !p.includes('"mark"')).length - counted;
      counted += wakeups;
      return wakeups;
    },
  };
}

/** Running workflows with one pending wait on payment/<key> each, written as the executor would. */
async function waitingOn(t: TestSchema, keys: string[]): Promise<Map<string, string>> {
  const rows = await asExecutor<{ id: string; key: string }>(
    t,
    `WITH wf AS (INSERT INTO stepd.workflows (name, flow, input, status)
                 SELECT 'w', $1::jsonb, jsonb_build_object('order', k), 'running' FROM unnest($2::text[]) k RETURNING id, created_at, input)
     INSERT INTO stepd.workflow_steps (workflow_id, name, tool, args, status, attempt)
     SELECT id, 'paid', NULL, jsonb_build_object('signal', jsonb_build_object('names', '["payment"]'::jsonb, 'key', input ->> 'order', 'since', created_at)), 'pending', 1
       FROM wf RETURNING id::text, args -> 'signal' ->> 'key' AS key`,
    [JSON.stringify(FLOW), keys],
  );
  return new Map(rows.map((r) => [r.key, r.id]));
}

const send = (t: TestSchema, key: string) => t.q(`INSERT INTO stepd.signals (name, key) VALUES ('payment', $1)`, [key]);
const statusOf = async (t: TestSchema, id: string) => (await t.q<{ status: string }>(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [id]))[0]!.status;

describe("a signal's wake-up", () => {
  it('NOTIFYs at commit only when no readied signal wait is already waiting for an executor', async () => {
    const t = await createTestSchema();
    const steps = await waitingOn(t, ['k1', 'k2', 'k3', 'k4', 'k4b', 'k5', 'k6']);
    const wakeups = await wakeupCounter(t);

    await send(t, 'k1'); // nothing on its way: wakes the executors
    expect(await statusOf(t, steps.get('k1')!)).toBe('ready');
    expect(await wakeups.settle()).toBe(1);

    await send(t, 'k2'); // k1's wait is ready and unclaimed: that wake-up covers this one
    expect(await statusOf(t, steps.get('k2')!)).toBe('ready');
    expect(await wakeups.settle()).toBe(0);

    // A REPEATABLE READ snapshot may be older than the executor's claims: it always wakes them.
    const rr = await t.db.connect();
    try {
      await rr.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await rr.query(`INSERT INTO ${t.schema}.signals (name, key) VALUES ('payment', 'k6')`);
      await rr.query('COMMIT');
    } finally {
      rr.release();
    }
    expect(await wakeups.settle()).toBe(1);

    await send(t, 'nobody'); // readies nothing: wakes nobody
    const tx = await t.db.connect();
    try {
      await tx.query('BEGIN');
      await tx.query(`INSERT INTO ${t.schema}.signals (name, key) VALUES ('payment', 'k3')`);
      await tx.query('ROLLBACK'); // rolled back: readies and wakes nothing
    } finally {
      tx.release();
    }
    expect(await statusOf(t, steps.get('k3')!)).toBe('pending');
    expect(await wakeups.settle()).toBe(0);

    // The executor recorded the ready waits just now (straight from ready, sql/0045): it is still
    // looking for more, so the next signal rides on that. (updated_at a minute ahead: however slow
    // this machine is, the send below still comes within 250 ms of it.)
    const done = [steps.get('k1'), steps.get('k2'), steps.get('k6')];
    await asExecutor(t, `UPDATE stepd.workflow_steps SET status = 'done', started_at = now(), completed_at = now(), updated_at = now() + interval '1 minute' WHERE id = ANY($1::bigint[])`, [done]);
    await send(t, 'k4');
    expect(await statusOf(t, steps.get('k4')!)).toBe('ready');
    expect(await wakeups.settle()).toBe(0);
    // …recorded more than 250 ms ago, and k4's wait taken too: the next signal has nothing to ride on.
    await asExecutor(t, `UPDATE stepd.workflow_steps SET updated_at = now() - interval '1 second' WHERE id = ANY($1::bigint[])`, [done]);
    await asExecutor(t, `UPDATE stepd.workflow_steps SET status = 'done', started_at = now(), completed_at = now(), updated_at = now() - interval '1 second' WHERE id = $1`, [steps.get('k4')]);
    await send(t, 'k4b');
    expect(await wakeups.settle()).toBe(1);

    // The decision is made at commit, not at the INSERT: k4's wait is ready when k5's INSERT runs,
    // gone by the time it commits.
    const late = await t.db.connect();
    try {
      await late.query('BEGIN');
      await late.query(`INSERT INTO ${t.schema}.signals (name, key) VALUES ('payment', 'k5')`);
      await asExecutor(t, `UPDATE stepd.workflow_steps SET status = 'done', started_at = now(), completed_at = now(), updated_at = now() - interval '1 second' WHERE id = $1`, [steps.get('k4b')]);
      await late.query('COMMIT');
    } finally {
      late.release();
    }
    expect(await statusOf(t, steps.get('k5')!)).toBe('ready');
    expect(await wakeups.settle()).toBe(1);

    // A ready wait whose row another transaction holds (a client's SELECT … FOR UPDATE; claims
    // skip it) is not on its way: the next signal wakes the executors (sql/0039).
    const holder = await t.db.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${t.schema}.workflow_steps WHERE id = $1 FOR KEY SHARE`, [steps.get('k5')]);
      await send(t, 'k3');
      expect(await statusOf(t, steps.get('k3')!)).toBe('ready');
      expect(await wakeups.settle()).toBe(1);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });

  it('a burst whose signals mostly skip their NOTIFY is all picked up without the poll', async () => {
    const t = await createTestSchema();
    // A poll far beyond the waits below: only the wake-ups and the lookout can start the steps in time.
    await startExecutor(t, { pollIntervalMs: 120_000 });
    const keys = Array.from({ length: 150 }, (_, i) => `o-${i}`);
    const steps = await waitingOn(t, keys);
    const wakeups = await wakeupCounter(t);
    const senders = new pg.Pool({ connectionString: t.url, max: 8 });
    onCleanup(() => senders.end());
    await Promise.all(
      Array.from({ length: 8 }, async (_, k) => {
        for (let i = k; i < keys.length; i += 8) await senders.query(`INSERT INTO ${t.schema}.signals (name, key) VALUES ('payment', $1)`, [keys[i]]);
      }),
    );
    const ids = [...steps.values()];
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(
        `SELECT count(*)::int AS n FROM stepd.workflows w WHERE w.status = 'completed' AND w.id IN (SELECT workflow_id FROM stepd.workflow_steps WHERE id = ANY($1::bigint[]))`,
        [ids],
      );
      return r!.n === keys.length;
    }, 'every workflow of the burst to complete', 60_000);
    // Some signals rode on another's wake-up (or this test proves nothing about skipped ones).
    expect(await wakeups.settle()).toBeLessThan(keys.length);
  });

  it("reads only the last second's consumptions to decide, however long their history (sql/0041)", async () => {
    const t = await createTestSchema();
    const steps = await waitingOn(t, ['k1', 'k2']);
    // An hour-old history of 3,000 consumptions (no live workflow behind them: only their age matters here).
    await t.q(`INSERT INTO stepd.signals (name, key) SELECT 'old', 'o-' || n FROM generate_series(1, 3000) n`);
    await t.q(
      `INSERT INTO stepd.signal_consumptions (workflow_id, signal_id, step_id, created_at)
       SELECT -s.id, s.id, -s.id, now() - interval '1 hour' FROM stepd.signals s WHERE s.name = 'old'`,
    );
    await t.q('ANALYZE stepd.signal_consumptions');
    const c = await t.db.connect();
    try {
      // The decision is made before the commit here (SET CONSTRAINTS … IMMEDIATE runs it), so
      // this session's statistics show what it read.
      const rowsRead = async () =>
        (await c.query<{ n: string }>(
          `SELECT coalesce(sum(seq_tup_read + idx_tup_fetch), 0)::text AS n FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'signal_consumptions'`,
          [t.schema],
        )).rows[0]!.n;
      for (const key of ['k1', 'k2']) {
        await c.query('BEGIN');
        await c.query(`INSERT INTO ${t.schema}.signals (name, key) VALUES ('payment', $1)`, [key]);
        // Counted before and after: a backend's counts gather over transactions until they are flushed.
        const before = Number(await rowsRead());
        await c.query('SET CONSTRAINTS ALL IMMEDIATE'); // runs the decision now
        expect(Number(await rowsRead()) - before).toBeLessThan(100);
        await c.query('COMMIT');
        expect(await statusOf(t, steps.get(key)!)).toBe('ready');
      }
    } finally {
      c.release();
    }
  });

  it('a match deferred past a row held for a moment is delivered at once, not at the next sweep (sql/0043)', async () => {
    const t = await createTestSchema();
    // Poll and sweep far beyond the wait below: only the deferral's wake-up can deliver in time.
    await startExecutor(t, { pollIntervalMs: 120_000, watchdogIntervalMs: 120_000 });
    const steps = await waitingOn(t, ['r1']);
    const holder = await t.db.connect();
    try {
      // Another transaction holds the wait's row (as a racing signal's would) while the signal commits.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${t.schema}.workflow_steps WHERE id = $1 FOR UPDATE`, [steps.get('r1')]);
      await send(t, 'r1');
      expect(await t.q(`SELECT count(*)::int AS n FROM stepd.signal_deferred_matches`)).toEqual([{ n: 1 }]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await waitFor(
      async () => (await t.q(`SELECT 1 FROM stepd.workflows w JOIN stepd.workflow_steps s ON s.workflow_id = w.id WHERE s.id = $1 AND w.status = 'completed'`, [steps.get('r1')]))[0],
      'the workflow completed with its deferred signal',
      20_000,
    );
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.signal_deferred_matches`)).toEqual([{ n: 0 }]);
  });
});
