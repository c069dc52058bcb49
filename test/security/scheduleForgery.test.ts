/**
 * Schedules on pg-boss (src/schedules/, `<schema>_boss`) from an attacker's side. The daemon turns
 * every job of the schedules queue into the workflow of the latest occurrence of the named
 * schedule's cron, as that schedule's user and role; what a client may write in pg-boss's schema
 * decides who can make such jobs.
 */
import { describe, expect, it } from 'vitest';
import { bossSchemaName, SCHEDULE_QUEUE } from '../../src/schedules/bossSchema.js';
import { refused, securityEnv } from './helpers.js';

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

  it.todo(
    "a client cannot make the daemon start another role's schedule off its cron, or replay a tick: today <schema>_client may " +
      "INSERT into <schema>_boss.schedule (bossGrantStatements), so a row (name 'stepd-schedules', key 'evil', cron '* * * * *', " +
      "data {\"schedule\": \"<victim's schedule>\"}) makes pg-boss send a job a minute; Scheduler.startTick starts the latest " +
      "occurrence of the victim's cron at or before it as the victim's created_by and created_role (actAs passes: it is the " +
      "victim's role). Verified: a yearly schedule ('0 0 1 1 *') added today ran at once (key schedule:NAME:2026-01-01T00:00:00.000Z) " +
      'as its owner, and again after the attacker DELETEd that finished workflow (clients may delete finished workflows), every ' +
      'minute, as often as it likes. Fix: (1) grant the client no write on <boss>.schedule (stepd schedule add/remove write ' +
      "stepd's row only; the daemon reconciles pg-boss from stepd.schedules, e.g. on a NOTIFY from a trigger on schedules and at " +
      "each start); (2) in startTick, start a tick only if job.createdOn is within pg-boss's forwarding window after it and the " +
      "tick is not before the schedule row's updated_at; better, record the last started tick on the schedule row " +
      '(executor-only column) and start only later ones, so deleting a tick workflow never frees its key for a replay',
  );
});
