/**
 * A `* * * * *` schedule over two real minutes: two daemons (executor + scheduler each) work it,
 * both are stopped after the first tick and two new ones started, and a duplicate job is slipped
 * into pg-boss's queue. Each tick still starts exactly one workflow. Takes one to three minutes
 * of real time (pg-boss's cron has minute resolution); it waits on conditions only.
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { silentLogger } from '../../src/logger.js';
import { bossSchemaName, SCHEDULE_QUEUE } from '../../src/schedules/bossSchema.js';
import { addSchedule } from '../../src/schedules/scheduleStore.js';
import { Scheduler } from '../../src/schedules/scheduler.js';
import type { Executor } from '../../src/executor/executor.js';
import { createTestSchema, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const echoFlow = { start: 'say', steps: { say: { tool: 'core.echo', args: { topic: '{{input.topic}}' }, done: true, output: '{{result}}' } } };

interface Daemon {
  executor: Executor;
  scheduler: Scheduler;
}

async function startDaemon(t: TestSchema): Promise<Daemon> {
  const executor = await startExecutor(t);
  const scheduler = new Scheduler({ databaseUrl: t.url, schema: t.schema, log: silentLogger(), cronMonitorIntervalSeconds: 1, cronWorkerIntervalSeconds: 1, pollIntervalSeconds: 0.5 });
  scheduler.start();
  onCleanup(() => scheduler.stop());
  return { executor, scheduler };
}

async function stopDaemon(d: Daemon): Promise<void> {
  await d.scheduler.stop();
  await d.executor.stop({ graceMs: 0 });
}

async function tickRows(t: TestSchema): Promise<{ id: string; key: string; status: string }[]> {
  return t.q(`SELECT id, key, status FROM stepd.workflows WHERE key LIKE 'schedule:every-minute:%' ORDER BY id`);
}

describe('a schedule ticking every minute', () => {
  it('starts exactly one workflow per tick with two daemons, across a restart of both and a duplicate job', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('tick', $1)`, [JSON.stringify(echoFlow)]);
    const c = await t.db.connect();
    try {
      await c.query(`SET search_path TO ${pg.escapeIdentifier(t.schema)}`);
      await addSchedule(c, t.schema, { name: 'every-minute', cron: '* * * * *', tz: 'UTC', flow: 'tick', input: { topic: 'tick' }, createdBy: 'cron' });
    } finally {
      c.release(true);
    }

    const first = [await startDaemon(t), await startDaemon(t)];
    const [tick1] = await waitFor(async () => {
      const rows = await tickRows(t);
      return rows.length >= 1 ? rows : undefined;
    }, 'the first tick', 150_000);

    // A second job for the same schedule, as a pg-boss retry or a hand-written job would be.
    const boss = new PgBoss({ db: { executeSql: (text, values) => t.db.query(text, values) }, schema: bossSchemaName(t.schema), migrate: false, schedule: false, supervise: false });
    const duplicate = await boss.send(SCHEDULE_QUEUE, { schedule: 'every-minute' });
    expect(duplicate).toBeTruthy();

    // Both daemons restart; the new ones carry on from pg-boss's tables.
    await Promise.all(first.map(stopDaemon));
    const second = [await startDaemon(t), await startDaemon(t)];
    const rows = await waitFor(async () => {
      const r = await tickRows(t);
      return r.length >= 2 ? r : undefined;
    }, 'a second tick after the restart', 150_000);

    // The duplicate job was worked (completed) without a workflow of its own.
    await waitFor(async () => (await t.q(`SELECT state FROM ${bossSchemaName(t.schema)}.job WHERE id = $1`, [duplicate]))[0]?.state === 'completed', 'the duplicate job to be worked', 30_000);

    const ticks = rows.map((r) => r.key.slice('schedule:every-minute:'.length));
    for (const tick of ticks) expect(tick).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/);
    expect(new Set(ticks).size).toBe(rows.length);
    // One workflow per minute: consecutive ticks are whole minutes apart, never the same minute twice.
    const times = ticks.map((k) => Date.parse(k)).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) expect((times[i]! - times[i - 1]!) % 60_000 === 0 && times[i]! > times[i - 1]!).toBe(true);
    expect(rows[0]!.key).toBe(tick1!.key);

    for (const r of rows) {
      const wf = await waitForWorkflow(t, r.id);
      expect(wf.status).toBe('completed');
      expect(wf.name).toBe('tick');
      expect(wf.created_by).toBe('cron');
      expect(wf.flow_version).toBe(1);
      expect(wf.output).toEqual({ topic: 'tick' });
    }
    await Promise.all(second.map(stopDaemon));
  }, 400_000);
});
