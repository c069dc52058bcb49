import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { createLogger, silentLogger } from '../../src/logger.js';
import { listSchedules } from '../../src/db/queries/schedules.js';
import { bossSchemaName, migrateBossSchema, SCHEDULE_QUEUE } from '../../src/schedules/bossSchema.js';
import { addSchedule, removeSchedule, ScheduleError } from '../../src/schedules/scheduleStore.js';
import { Scheduler } from '../../src/schedules/scheduler.js';
import { insertWorkflow as insertThroughContract } from '../../src/db/contract.js';
import { migrate } from '../../src/db/migrate.js';
import { createClientRole, createLoginRole, createSecuredSchema, ProbeTools, schemaRoles } from '../security/helpers.js';
import { createTestSchema, dropSchemaAndRoles, getWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const echoFlow = { start: 'say', steps: { say: { tool: 'core.echo', args: { topic: '{{input.topic}}' }, done: true, output: '{{result}}' } } };
const whoamiFlow = { start: 'who', steps: { who: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };

async function putFlow(t: TestSchema, name: string, flow: unknown): Promise<void> {
  await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2)`, [name, JSON.stringify(flow)]);
}

/** A client connection of `pool` for the duration of `fn` (schedules are written on one connection). */
async function onConnection<T>(pool: pg.Pool, schema: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
    return await fn(c);
  } finally {
    c.release(true);
  }
}

function startScheduler(t: TestSchema, more: { idleCheckMs?: number } = {}): Scheduler {
  const s = new Scheduler({
    syncIntervalMs: 100,
    ...more,
    databaseUrl: t.url,
    schema: t.schema,
    log: silentLogger(),
    // The shortest pg-boss allows, so a tick is forwarded within seconds of its minute.
    cronMonitorIntervalSeconds: 1,
    cronWorkerIntervalSeconds: 1,
    pollIntervalSeconds: 0.5,
  });
  s.start();
  onCleanup(() => s.stop());
  return s;
}

async function expectRefusal(p: Promise<unknown>, code: string, text: string): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ScheduleError);
  expect((err as ScheduleError).code).toBe(code);
  expect((err as Error).message).toContain(text);
}

describe('schedules', () => {
  it('refuses an unregistered flow, a cron that does not parse, an unknown time zone and a bad name; nothing is stored', async () => {
    const t = await createTestSchema();
    await putFlow(t, 'report', echoFlow);
    await onConnection(t.db, t.schema, async (c) => {
      const base = { cron: '0 2 * * *', tz: 'UTC', flow: 'report', input: {}, createdBy: null };
      await expectRefusal(addSchedule(c, t.schema, { ...base, name: 'a', flow: 'no-such-flow' }), 'unknown_flow', 'flow "no-such-flow" is not registered');
      await expectRefusal(addSchedule(c, t.schema, { ...base, name: 'b', cron: '61 * * * *' }), 'invalid_schedule', 'cron expression "61 * * * *" cannot be read');
      await expectRefusal(addSchedule(c, t.schema, { ...base, name: 'c', cron: 'every day' }), 'invalid_schedule', 'use five fields');
      await expectRefusal(addSchedule(c, t.schema, { ...base, name: 'd', tz: 'Mars/Olympus' }), 'invalid_schedule', 'unknown time zone "Mars/Olympus"');
      await expectRefusal(addSchedule(c, t.schema, { ...base, name: 'no spaces' }), 'invalid_schedule', 'is not valid');
    });
    expect(await listSchedules(withPath(t))).toEqual([]);
    expect(await t.q(`SELECT * FROM ${bossSchemaName(t.schema)}.schedule`)).toEqual([]);
    // Plain SQL gets the same refusals from the database.
    await expect(t.q(`INSERT INTO stepd.schedules (name, cron, flow, tz) VALUES ('x', '* * * * *', 'report', 'Nowhere/Land')`)).rejects.toThrow(/unknown time zone "Nowhere\/Land"/);
    await expect(t.q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ('x', '* * * * *', 'ghost')`)).rejects.toThrow(/names flow "ghost", which is not registered/);
  });

  it("lists, replaces and removes schedules in stepd's table, recording the role that wrote each; the daemon keeps pg-boss's in step", async () => {
    const t = await createSecuredSchema();
    await putFlow(t, 'report', echoFlow);
    const alice = await createClientRole(t);
    const row = await onConnection(alice.pool, t.schema, (c) =>
      addSchedule(c, t.schema, { name: 'nightly', cron: '0 2 * * *', tz: 'Europe/Paris', flow: 'report', input: { topic: 'x' }, createdBy: 'james' }),
    );
    expect(row).toMatchObject({ name: 'nightly', cron: '0 2 * * *', tz: 'Europe/Paris', flow: 'report', created_by: 'james', created_role: alice.role, created: true });
    // The client wrote stepd's row only; the daemon puts it into pg-boss.
    const bossRows = () => t.q(`SELECT name, key, cron, timezone, data FROM ${bossSchemaName(t.schema)}.schedule ORDER BY key`);
    expect(await bossRows()).toEqual([]);
    startScheduler(t, { idleCheckMs: 100 });
    const inBoss = (cron: string, tz: string) => [{ name: SCHEDULE_QUEUE, key: 'nightly', cron, timezone: tz, data: { schedule: 'nightly' } }];
    await waitFor(async () => JSON.stringify(await bossRows()) === JSON.stringify(inBoss('0 2 * * *', 'Europe/Paris')), 'the schedule in pg-boss');

    const replaced = await onConnection(t.db, t.schema, (c) =>
      addSchedule(c, t.schema, { name: 'nightly', cron: '30 3 * * *', tz: 'UTC', flow: 'report', input: {}, createdBy: 'james' }),
    );
    expect(replaced).toMatchObject({ cron: '30 3 * * *', created: false, created_role: 'postgres' });
    await waitFor(async () => JSON.stringify(await bossRows()) === JSON.stringify(inBoss('30 3 * * *', 'UTC')), 'the new cron in pg-boss');
    // A pg-boss schedule stepd does not have (written by someone with the executor's rights) is taken out.
    await t.q(`INSERT INTO ${bossSchemaName(t.schema)}.schedule (name, key, cron, timezone, data) VALUES ($1, 'stray', '* * * * *', 'UTC', '{"schedule": "nightly"}')`, [SCHEDULE_QUEUE]);
    await waitFor(async () => JSON.stringify(await bossRows()) === JSON.stringify(inBoss('30 3 * * *', 'UTC')), 'the stray pg-boss schedule removed');

    await onConnection(alice.pool, t.schema, (c) => removeSchedule(c, t.schema, 'nightly'));
    expect(await t.q(`SELECT name FROM stepd.schedules`)).toEqual([]);
    await waitFor(async () => (await bossRows()).length === 0, 'the schedule removed from pg-boss');
    await onConnection(alice.pool, t.schema, (c) => expectRefusal(removeSchedule(c, t.schema, 'nightly'), 'not_found', 'no schedule named "nightly"'));
  });

  it("a tick runs as the schedule's user only when the role that wrote the schedule may act as that user", async () => {
    const t = await createSecuredSchema();
    await putFlow(t, 'who', whoamiFlow);
    const alice = await createClientRole(t);
    const probe = new ProbeTools();
    await startExecutor(t, { tools: [probe], clients: { [alice.role]: { actAs: ['bot-*'] } } });
    // Written by alice: one as a user she may act as, one as a user she may not.
    await onConnection(alice.pool, t.schema, async (c) => {
      await addSchedule(c, t.schema, { name: 'as-bot', cron: '* * * * *', tz: 'UTC', flow: 'who', input: {}, createdBy: 'bot-7' });
      await addSchedule(c, t.schema, { name: 'as-james', cron: '* * * * *', tz: 'UTC', flow: 'who', input: {}, createdBy: 'james' });
    });
    startScheduler(t);
    const tickOf = async (name: string) =>
      waitFor(async () => (await t.q(`SELECT id FROM stepd.workflows WHERE key LIKE $1`, [`schedule:${name}:%`]))[0]?.id as string | undefined, `a tick of ${name}`, 90_000);

    const asBot = await waitForWorkflow(t, await tickOf('as-bot'), undefined, 30_000);
    expect(asBot.status).toBe('completed');
    expect(asBot.created_by).toBe('bot-7');
    expect(asBot.created_role).toBe(alice.role);
    expect(asBot.output).toEqual({ user: 'bot-7' });

    const asJames = await waitForWorkflow(t, await tickOf('as-james'), undefined, 30_000);
    expect(asJames.status).toBe('failed');
    expect(asJames.error).toMatchObject({ code: 'permission_denied', details: { role: alice.role, user: 'james' } });
    expect(probe.calls.filter((c) => c.user === 'james')).toEqual([]);
  });

  it('runs no pg-boss while there is no schedule, and starts it once one is added', async () => {
    const t = await createTestSchema();
    await putFlow(t, 'report', echoFlow);
    const scheduler = startScheduler(t, { idleCheckMs: 100 });
    // Several idle checks go by (each one is a single read on stepd's pool).
    await waitFor(async () => Number((await t.q(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1`, [`stepd-scheduler:${t.schema}`]))[0].n) > 0, 'the idle check');
    expect(scheduler.started).toBe(false);
    expect(await t.q(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [`stepd-scheduler-boss:${t.schema}`])).toEqual([]);
    await onConnection(t.db, t.schema, (c) => addSchedule(c, t.schema, { name: 'n', cron: '0 0 1 1 *', tz: 'UTC', flow: 'report', input: {}, createdBy: null }));
    await waitFor(() => scheduler.started, 'pg-boss to start');
  });

  it('stops pg-boss (its connections closed) once the last schedule is removed, and starts it again, ticking, when one is added', async () => {
    const t = await createTestSchema();
    await putFlow(t, 'report', echoFlow);
    const scheduler = startScheduler(t, { idleCheckMs: 100 });
    const bossConnections = async () =>
      Number((await t.q(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1`, [`stepd-scheduler-boss:${t.schema}`]))[0].n);
    await onConnection(t.db, t.schema, (c) => addSchedule(c, t.schema, { name: 'a', cron: '0 0 1 1 *', tz: 'UTC', flow: 'report', input: {}, createdBy: null }));
    await waitFor(() => scheduler.started, 'pg-boss to start');
    await waitFor(async () => (await bossConnections()) > 0, "pg-boss's connections");
    await onConnection(t.db, t.schema, (c) => removeSchedule(c, t.schema, 'a'));
    await waitFor(() => !scheduler.started, 'pg-boss to stop');
    await waitFor(async () => (await bossConnections()) === 0, "pg-boss's connections closed");
    expect(await t.q(`SELECT key FROM ${bossSchemaName(t.schema)}.schedule`)).toEqual([]);
    // Added again: pg-boss starts again and the sync puts the schedule into it.
    await onConnection(t.db, t.schema, (c) => addSchedule(c, t.schema, { name: 'b', cron: '0 0 1 1 *', tz: 'UTC', flow: 'report', input: {}, createdBy: null }));
    await waitFor(() => scheduler.started, 'pg-boss to start again');
    await waitFor(async () => (await t.q(`SELECT key FROM ${bossSchemaName(t.schema)}.schedule`))[0]?.key === 'b', 'the schedule in the new pg-boss');
  });

  it('keeps the executor running while pg-boss cannot start, and starts schedules (also ones written by plain SQL) once stepd migrate has installed it', async () => {
    const t = await createTestSchema();
    await putFlow(t, 'report', echoFlow);
    await t.q(`DROP SCHEMA ${bossSchemaName(t.schema)} CASCADE`);
    // A schedule written by plain SQL: stepd's row only, no pg-boss schedule yet.
    await t.q(`INSERT INTO stepd.schedules (name, cron, flow, input) VALUES ('plain', '* * * * *', 'report', '{"topic": "plain"}')`);
    await startExecutor(t);
    const scheduler = startScheduler(t, { idleCheckMs: 100 });
    const id = (await t.q<{ id: string }>(`INSERT INTO stepd.workflows (name, input) VALUES ('report', '{"topic": "meanwhile"}') RETURNING id`))[0]!.id;
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    expect(scheduler.started).toBe(false);

    await migrateBossSchema({ url: t.url, schema: t.schema });
    await waitFor(() => scheduler.started, 'pg-boss to start after the migration', 60_000);
    const tick = await waitFor(async () => (await t.q(`SELECT id FROM stepd.workflows WHERE key LIKE 'schedule:plain:%'`))[0]?.id as string | undefined, 'a tick of the plain-SQL schedule', 90_000);
    expect((await waitForWorkflow(t, tick)).output).toEqual({ topic: 'plain' });
  });

  it('pg-boss runs as a member of the executor role (no superuser): ticks start workflows and pg-boss reports no error', async () => {
    const t = await createSecuredSchema();
    await putFlow(t, 'report', echoFlow);
    await onConnection(t.db, t.schema, (c) => addSchedule(c, t.schema, { name: 'm', cron: '* * * * *', tz: 'UTC', flow: 'report', input: { topic: 'm' }, createdBy: null }));
    const daemon = await createLoginRole(t, schemaRoles(t.schema).executor, `exe_${t.schema}`);
    await startExecutor({ ...t, url: daemon.url });
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } as never });
    const scheduler = new Scheduler({ databaseUrl: daemon.url, schema: t.schema, log, cronMonitorIntervalSeconds: 1, cronWorkerIntervalSeconds: 1, pollIntervalSeconds: 0.5 });
    scheduler.start();
    onCleanup(() => scheduler.stop());
    const tick = await waitFor(async () => (await t.q(`SELECT id FROM stepd.workflows WHERE key LIKE 'schedule:m:%'`))[0]?.id as string | undefined, 'a tick', 90_000);
    expect((await waitForWorkflow(t, tick)).status).toBe('completed');
    // pg-boss's maintenance (normally once a minute) works with the same grants.
    const maintenance = new PgBoss({ connectionString: daemon.url, schema: bossSchemaName(t.schema), migrate: false, schedule: false, supervise: false, reindex: false });
    maintenance.on('error', (err) => lines.push({ err: String(err) }));
    await maintenance.start();
    try {
      await maintenance.supervise();
    } finally {
      await maintenance.stop({ graceful: false });
    }
    expect(lines).toEqual([]);
  });

  it("gives a migrator that may not create schemas pg-boss's SQL for a DBA; once run, schedules can be added", async () => {
    const t = await createTestSchema();
    const owner = await createLoginRole(t, schemaRoles(t.schema).client, `own_${t.schema}`);
    const schema = `${t.schema}_own`;
    await t.db.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${owner.role}`);
    onCleanup(() => dropSchemaAndRoles(t.db, schema));
    const first = await migrate({ url: owner.url, schema });
    expect(first.boss).toMatchObject({ schema: `${schema}_boss`, status: 'needs-dba', version: null });
    // The DBA creates the schema for the migrator, which then installs pg-boss into it itself.
    expect(first.boss!.sql).toContain(`CREATE SCHEMA IF NOT EXISTS "${schema}_boss" AUTHORIZATION "${owner.role}"`);
    expect(first.rolesSql).not.toContain(`${schema}_boss`);
    await t.db.query(first.rolesSql!);
    await t.db.query(first.boss!.sql!);
    const again = await migrate({ url: owner.url, schema });
    expect(again.boss).toMatchObject({ status: 'created', granted: true });
    const s: TestSchema = { ...t, schema, q: async (text, values) => (await t.db.query(text.replaceAll('stepd.', `${schema}.`), values)).rows };
    await putFlow(s, 'report', echoFlow);
    const row = await onConnection(t.db, schema, (c) => addSchedule(c, schema, { name: 'n', cron: '0 0 * * *', tz: 'UTC', flow: 'report', input: {}, createdBy: null }));
    expect(row.created).toBe(true);
  });

  it('a workflow with a start_at is admitted only once that time has come, woken by its alarm rather than the poll', async () => {
    const t = await createTestSchema();
    // A minute-long poll: only the start_at alarm can admit the delayed workflows in time.
    await startExecutor(t, { pollIntervalMs: 60_000 });
    const later = await insertThroughContract(withPath(t), { name: 'later', flow: echoFlow, input: { topic: 'later' }, createdBy: null, key: null, startAt: { inMs: 2_500 } });
    expect(later?.status).toBe('new');
    const id = later!.id;
    // Not admitted before its time (checked well within the 2.5 s).
    expect((await getWorkflow(t, id)).status).toBe('new');
    const done = await waitForWorkflow(t, id, undefined, 20_000);
    expect(done.status).toBe('completed');
    expect(done.started_at!.getTime()).toBeGreaterThanOrEqual(done.start_at!.getTime());

    // An absolute time works the same way.
    const at = new Date(Date.now() + 1_500);
    const absolute = await insertThroughContract(withPath(t), { name: 'at', flow: echoFlow, input: { topic: 'at' }, createdBy: null, key: null, startAt: { at } });
    const done2 = await waitForWorkflow(t, absolute!.id, undefined, 20_000);
    expect(done2.status).toBe('completed');
    expect(done2.started_at!.getTime()).toBeGreaterThanOrEqual(at.getTime());
  });

  it('a delayed workflow can be cancelled before its start_at and is never admitted', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const wf = await insertThroughContract(withPath(t), { name: 'later', flow: echoFlow, input: { topic: 'cancelled' }, createdBy: null, key: null, startAt: { inMs: 1_500 } });
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [wf!.id]);
    // One due after the cancelled one's start_at runs; by then the cancelled one would have been admitted.
    const next = await insertThroughContract(withPath(t), { name: 'after', flow: echoFlow, input: { topic: 'after' }, createdBy: null, key: null, startAt: { inMs: 2_000 } });
    expect((await waitForWorkflow(t, next!.id)).status).toBe('completed');
    const cancelled = await getWorkflow(t, wf!.id);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.started_at).toBeNull();
    expect(await t.q(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = $1`, [wf!.id])).toEqual([]);
  });
});

/** A Queryable on the test pool with the schema on its search_path (as the CLI's pool has). */
function withPath(t: TestSchema) {
  return {
    query: async <R = any>(config: { text: string; values?: unknown[] }) => {
      const c = await t.db.connect();
      try {
        await c.query(`SET search_path TO ${pg.escapeIdentifier(t.schema)}`);
        const r = await c.query(config.text, config.values);
        return { rows: r.rows as R[], rowCount: r.rowCount };
      } finally {
        await c.query('RESET search_path').catch(() => {});
        c.release();
      }
    },
  };
}
