/**
 * Schedule policies (docs/schedules.md): overlap skip|allow|cancel-previous, catch-up
 * none|latest|all of ticks missed while no daemon ran, and pause/resume. Real database, real
 * executor, real pg-boss; the ticks of the overlap tests are started the way a pg-boss job starts
 * them (startTickUnderPolicies on an executor connection), so no test waits for a real minute.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { getSchedule } from '../../src/db/queries/schedules.js';
import { silentLogger } from '../../src/logger.js';
import { addSchedule } from '../../src/schedules/scheduleStore.js';
import { Scheduler } from '../../src/schedules/scheduler.js';
import { startTickUnderPolicies } from '../../src/schedules/tickStart.js';
import { createTestSchema, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import type { CatchUpPolicy, OverlapPolicy } from '../../src/db/queries/schedules.js';

const GATED = { start: 'review', steps: { review: { approval: true, next: 'done' }, done: { tool: 'core.echo', args: {} } } };
const ECHO = { start: 'say', steps: { say: { tool: 'core.echo', args: { hi: 1 } } } };

async function withSchedule(t: TestSchema, name: string, flow: unknown, policies: { overlap?: OverlapPolicy; catchUp?: CatchUpPolicy; cron?: string } = {}) {
  await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2)`, [`${name}-flow`, JSON.stringify(flow)]);
  const c = await t.db.connect();
  try {
    await c.query(`SET search_path TO ${pg.escapeIdentifier(t.schema)}`);
    await addSchedule(c, t.schema, { name, cron: policies.cron ?? '0 * * * *', tz: 'UTC', flow: `${name}-flow`, input: {}, createdBy: 'cron', ...(policies.overlap ? { overlap: policies.overlap } : {}), ...(policies.catchUp ? { catchUp: policies.catchUp } : {}) });
  } finally {
    c.release(true);
  }
}

function executorPool(t: TestSchema): pg.Pool {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 3 });
  onCleanup(() => pool.end());
  return pool;
}

/** Starts the tick `hour` (2026-01-01T<hour>:00Z) of the schedule as a pg-boss job would. */
async function tick(t: TestSchema, pool: pg.Pool, name: string, hour: number) {
  const row = (await getSchedule(pool, name))!;
  return startTickUnderPolicies(pool, { schema: t.schema, schedule: row, tick: new Date(Date.UTC(2026, 0, 1, hour)) });
}

describe('overlap', () => {
  it('skip: a tick starts nothing while the previous tick\'s workflow runs, and starts again once it ended', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await withSchedule(t, 'gated', GATED, { overlap: 'skip' });
    const pool = executorPool(t);
    const first = await tick(t, pool, 'gated', 1);
    expect(first.outcome).toBe('started');
    const w1 = (first as { workflowId: string }).workflowId;
    await waitForStep(t, w1, 'review', 'pending');
    expect(await tick(t, pool, 'gated', 2)).toEqual({ outcome: 'skipped-overlap', running: w1 });
    // The skipped tick is handled: it is never started later.
    expect(await tick(t, pool, 'gated', 2)).toEqual({ outcome: 'not-later' });
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [w1]);
    expect((await tick(t, pool, 'gated', 3)).outcome).toBe('started');
    expect(await t.q(`SELECT key FROM stepd.workflows ORDER BY id`)).toEqual([{ key: 'schedule:gated:2026-01-01T01:00:00.000Z' }, { key: 'schedule:gated:2026-01-01T03:00:00.000Z' }]);
  });

  it('cancel-previous: the running workflow is cancelled (its gate too) and the tick\'s starts', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await withSchedule(t, 'gated', GATED, { overlap: 'cancel-previous' });
    const pool = executorPool(t);
    const w1 = ((await tick(t, pool, 'gated', 1)) as { workflowId: string }).workflowId;
    await waitForStep(t, w1, 'review', 'pending');
    const second = await tick(t, pool, 'gated', 2);
    expect(second).toMatchObject({ outcome: 'started', cancelled: w1 });
    expect((await waitForWorkflow(t, w1, ['cancelled'])).status).toBe('cancelled');
    expect(await t.q(`SELECT name, status FROM stepd.workflow_steps WHERE workflow_id = $1`, [w1])).toEqual([{ name: 'review', status: 'cancelled' }]);
    await waitForStep(t, (second as { workflowId: string }).workflowId, 'review', 'pending');
  });

  it('allow (the default): every tick starts, whatever runs; a paused schedule starts nothing', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await withSchedule(t, 'gated', GATED);
    const pool = executorPool(t);
    expect((await tick(t, pool, 'gated', 1)).outcome).toBe('started');
    expect((await tick(t, pool, 'gated', 2)).outcome).toBe('started');
    await t.q(`UPDATE stepd.schedules SET paused = true WHERE name = 'gated'`);
    expect(await tick(t, pool, 'gated', 3)).toEqual({ outcome: 'paused' });
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status IN ('new', 'running')`)).toEqual([{ n: 2 }]);
  });

  it('copies of one tick on several connections at once start one workflow', async () => {
    const t = await createTestSchema();
    await withSchedule(t, 'echo', ECHO, { overlap: 'skip' });
    const pool = executorPool(t);
    const results = await Promise.all([1, 2, 3].map(() => tick(t, pool, 'echo', 5)));
    expect(results.map((r) => r.outcome).sort()).toEqual(['not-later', 'not-later', 'started']);
    expect(await t.q(`SELECT count(*)::int AS n FROM stepd.workflows`)).toEqual([{ n: 1 }]);
  });
});

describe('catch-up', () => {
  it('starts the ticks missed while no daemon ran: all of them once, the latest only, none, and nothing of a paused schedule', { timeout: 90_000 }, async () => {
    const t = await createTestSchema();
    for (const [name, catchUp] of [['a-all', 'all'], ['b-paused', 'all'], ['c-none', 'none'], ['d-latest', 'latest']] as const) {
      await withSchedule(t, name, ECHO, { cron: '* * * * *', catchUp });
    }
    await t.q(`UPDATE stepd.schedules SET paused = true WHERE name = 'b-paused'`);
    // As if written 10 minutes ago and no daemon ran since (the stamp trigger would set now()).
    const c = await t.db.connect();
    try {
      await c.query(`SET session_replication_role = replica`);
      await c.query(`UPDATE ${pg.escapeIdentifier(t.schema)}.schedules SET updated_at = now() - interval '10 minutes'`);
    } finally {
      c.release(true);
    }
    const since = (await t.q<{ since: Date }>(`SELECT min(updated_at) AS since FROM stepd.schedules`))[0]!.since;
    // Two daemons catch up at once: still one workflow per tick.
    for (let i = 0; i < 2; i++) {
      const s = new Scheduler({ databaseUrl: t.url, schema: t.schema, log: silentLogger(), syncIntervalMs: 200, pollIntervalSeconds: 0.5, missedAfterMs: 120_000 });
      s.start();
      onCleanup(() => s.stop());
    }
    const keys = async (name: string) => (await t.q<{ key: string }>(`SELECT key FROM stepd.workflows WHERE key LIKE $1 ORDER BY key`, [`schedule:${name}:%`])).map((r) => r.key);
    const latest = await waitFor(async () => {
      const k = await keys('d-latest');
      return k.length > 0 ? k : undefined;
    }, 'the latest missed tick of d-latest', 60_000);
    const all = await keys('a-all');
    const minutes = (ks: string[]) => ks.map((k) => Date.parse(k.slice(k.indexOf(':', 'schedule:'.length) + 1)));
    // Every minute after the last write, up to two minutes ago (younger ones are pg-boss's), once each.
    const missed = minutes(all).filter((m) => m < Date.now() - 120_000 - 60_000);
    expect(missed.length).toBeGreaterThanOrEqual(6);
    expect(new Set(all).size).toBe(all.length);
    for (let i = 1; i < missed.length; i++) expect(missed[i]! - missed[i - 1]!).toBe(60_000);
    expect(missed[0]! - new Date(since).getTime()).toBeLessThanOrEqual(60_000);
    // latest: one tick of the missed ones (pg-boss may add the current minute's own).
    expect(minutes(latest).filter((m) => m < Date.now() - 60_000 - 120_000).length).toBeLessThanOrEqual(1);
    expect(latest.length).toBeLessThanOrEqual(3);
    // none and paused: no missed tick started.
    expect(minutes(await keys('c-none')).filter((m) => m < new Date(since).getTime() + 7 * 60_000)).toEqual([]);
    expect(await keys('b-paused')).toEqual([]);
  });
});
