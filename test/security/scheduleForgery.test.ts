/**
 * Schedules on pg-boss (src/schedules/, `<schema>_boss`) from an attacker's side. The daemon turns
 * every job of the schedules queue into the workflow of the latest occurrence of the named
 * schedule's cron, as that schedule's user and role; what a client may write in pg-boss's schema
 * decides who can make such jobs.
 */
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { getSchedule } from '../../src/db/queries/schedules.js';
import { startTickUnderPolicies } from '../../src/schedules/tickStart.js';
import { silentLogger } from '../../src/logger.js';
import { bossSchemaName, SCHEDULE_QUEUE } from '../../src/schedules/bossSchema.js';
import { Scheduler } from '../../src/schedules/scheduler.js';
import { addSchedule } from '../../src/schedules/scheduleStore.js';
import { createClientRole, onCleanup, refused, schemaRoles, securityEnv, waitFor, waitForWorkflow, type ClientRole } from './helpers.js';

const WHOAMI = { start: 'who', steps: { who: { tool: 'probe.whoami', done: true, output: '{{result}}' } } };

/** One connection of `role`'s pool with the schema on its search_path, as the CLI has it. */
async function onConnection<T>(role: ClientRole, schema: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await role.pool.connect();
  try {
    await c.query(`SET search_path TO ${pg.escapeIdentifier(schema)}`);
    return await fn(c);
  } finally {
    c.release(true);
  }
}

describe("pg-boss's schema as a client sees it", () => {
  it("a client can neither write pg-boss's jobs or queues nor run its functions on them", async () => {
    const env = await securityEnv();
    const boss = bossSchemaName(env.t.schema);
    const c = env.client;
    const job = `INSERT INTO ${boss}.job (name, data) VALUES ($1, '{"schedule": "x"}')`;
    await refused(c.q(job, [SCHEDULE_QUEUE]), /permission denied/);
    await refused(c.q(`UPDATE ${boss}.job SET data = '{}'`), /permission denied/);
    await refused(c.q(`DELETE FROM ${boss}.queue`), /permission denied/);
    await refused(c.q(`UPDATE ${boss}.queue SET retry_limit = 0`), /permission denied/);
    await refused(c.q(`SELECT ${boss}.delete_queue($1)`, [SCHEDULE_QUEUE]), /permission denied/);
    await refused(c.q(`SELECT ${boss}.create_queue('evil', '{}'::jsonb)`), /permission denied/);
    await refused(c.q(`CREATE TABLE ${boss}.evil (x int)`), /permission denied/);
    await refused(c.q(`CREATE OR REPLACE FUNCTION ${boss}.job_now() RETURNS timestamptz LANGUAGE sql AS 'SELECT now() + interval ''1 year'''`), /permission denied|must be owner/);
    expect(await env.t.q(`SELECT name FROM ${boss}.queue WHERE name = $1`, [SCHEDULE_QUEUE])).toHaveLength(1);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a client can neither write pg-boss's schedules nor make the daemon start a tick it did not just reach; a started tick never starts again", async () => {
    const env = await securityEnv({ config: { clients: {} } });
    const boss = bossSchemaName(env.t.schema);
    const victim = await createClientRole(env.t);
    await victim.q(`INSERT INTO stepd.flows (name, flow) VALUES ('yearly-report', $1)`, [JSON.stringify(WHOAMI)]);
    await onConnection(victim, env.t.schema, (c) =>
      addSchedule(c, env.t.schema, { name: 'yearly', cron: '0 0 1 1 *', tz: 'UTC', flow: 'yearly-report', input: {}, createdBy: null }),
    );
    // (1) pg-boss's schedules are the daemon's alone: the attack row of the review is refused.
    const forged = `INSERT INTO ${boss}.schedule (name, key, cron, timezone, data) VALUES ($1, 'evil', '* * * * *', 'UTC', '{"schedule": "yearly"}')`;
    await refused(env.client.q(forged, [SCHEDULE_QUEUE]), /permission denied/);
    await refused(env.client.q(`UPDATE ${boss}.schedule SET cron = '* * * * *'`), /permission denied/);
    await refused(env.client.q(`DELETE FROM ${boss}.schedule`), /permission denied/);
    await refused(env.client.q(`SELECT * FROM ${boss}.schedule`), /permission denied/);

    // The daemon puts stepd's schedule into pg-boss itself.
    const scheduler = new Scheduler({ databaseUrl: env.t.url, schema: env.t.schema, log: silentLogger(), syncIntervalMs: 100, pollIntervalSeconds: 0.5 });
    scheduler.start();
    onCleanup(() => scheduler.stop());
    await waitFor(async () => (await env.t.q(`SELECT key FROM ${boss}.schedule WHERE key = 'yearly'`)).length === 1, 'the schedule in pg-boss');

    // (2) A job naming the schedule now (forged, or replayed) is far from the cron's last
    // occurrence (1 January): worked, and nothing starts.
    const sender = new PgBoss({ db: { executeSql: (text, values) => env.t.db.query(text, values) }, schema: boss, migrate: false, schedule: false, supervise: false });
    const job = await sender.send(SCHEDULE_QUEUE, { schedule: 'yearly' });
    await waitFor(async () => (await env.t.q(`SELECT state FROM ${boss}.job WHERE id = $1`, [job]))[0]?.state === 'completed', 'the job to be worked');
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE key LIKE 'schedule:yearly:%'`)).toEqual([]);

    // (3) A tick starts once: deleting its finished workflow never frees it, nor any earlier tick.
    const exe = createPool({ url: env.t.url, schema: env.t.schema, role: 'executor', max: 1 });
    onCleanup(() => exe.end());
    const row = (await getSchedule(exe, 'yearly'))!;
    const start = async (tick: string) => {
      const r = await startTickUnderPolicies(exe, { schema: env.t.schema, schedule: row, tick: new Date(tick) });
      return r.outcome === 'started' ? r.workflowId : undefined;
    };
    const first = await start('2026-01-01T00:00:00.000Z');
    expect(first).toBeTruthy();
    expect((await waitForWorkflow(env.t, first!)).output).toEqual({ user: victim.role });
    expect(await victim.q(`SELECT * FROM stepd.delete_workflows(ARRAY[$1::bigint])`, [first])).toHaveLength(1);
    expect(await start('2026-01-01T00:00:00.000Z')).toBeUndefined();
    expect(await start('2025-01-01T00:00:00.000Z')).toBeUndefined();
    expect(await start('2027-01-01T00:00:00.000Z')).toBeTruthy();
    // The record is the executor's: a client can neither read nor reset it.
    await refused(env.client.q(`DELETE FROM stepd.schedule_ticks`), /permission denied/);
    await refused(env.client.q(`INSERT INTO stepd.schedule_ticks (name, last_tick) VALUES ('yearly', '2000-01-01')`), /permission denied/);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('stepd migrate takes back the pg-boss grants earlier versions gave the client role', async () => {
    const env = await securityEnv();
    const boss = bossSchemaName(env.t.schema);
    const client = schemaRoles(env.t.schema).client;
    // What migrations before 0017 granted.
    await env.t.q(`GRANT USAGE ON SCHEMA ${boss} TO ${client}`);
    await env.t.q(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${boss}.schedule TO ${client}`);
    await env.client.q(`SELECT count(*) FROM ${boss}.schedule`);
    await migrate({ url: env.t.url, schema: env.t.schema });
    await refused(env.client.q(`INSERT INTO ${boss}.schedule (name, key, cron, timezone, data) VALUES ($1, 'evil', '* * * * *', 'UTC', '{}')`, [SCHEDULE_QUEUE]), /permission denied/);
    await refused(env.client.q(`SELECT count(*) FROM ${boss}.schedule`), /permission denied/);
    await env.bystander.assertUndisturbedAndServed();
  });
});
