/**
 * Schedule policies (sql/0033) as attack surface: clients got column grants on overlap,
 * catch_up and paused. Another client role can neither pause, resume nor change the policies of
 * a schedule it does not own; a pause (even by a trusted role) keeps the role that answers for
 * the ticks (created_role); values outside the policies are refused; the tick record stays the
 * executor's; a role with no grants can do none of it.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createLoginRole, createClientRole, refused, securityEnv } from './helpers.js';
import pg from 'pg';
import { onCleanup } from '../helpers/db.js';

const ECHO = { start: 'a', steps: { a: { tool: 'core.echo', args: { x: 1 }, done: true, output: '{{result}}' } } };

describe('schedule policies and pause', () => {
  it('only the owner (or a trusted role) pauses, resumes or changes the policies; a pause keeps created_role', async () => {
    const env = await securityEnv();
    const alice = await createClientRole(env.t, { name: `alice_${randomBytes(4).toString('hex')}` });
    await alice.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(ECHO)]);
    await alice.q(`INSERT INTO stepd.schedules (name, cron, flow, overlap, catch_up) VALUES ('nightly', '0 9 * * *', 'report', 'skip', 'latest')`);
    const c = env.client;

    await refused(c.q(`UPDATE stepd.schedules SET paused = true WHERE name = 'nightly'`), /schedule nightly belongs to role/);
    await refused(c.q(`UPDATE stepd.schedules SET overlap = 'allow', catch_up = 'all' WHERE name = 'nightly'`), /belongs to role/);
    await refused(alice.q(`UPDATE stepd.schedules SET overlap = 'sometimes' WHERE name = 'nightly'`), /schedules_overlap_valid/);
    await refused(alice.q(`UPDATE stepd.schedules SET catch_up = 'everything' WHERE name = 'nightly'`), /schedules_catch_up_valid/);
    await refused(c.q(`UPDATE stepd.schedule_ticks SET last_workflow_id = 1`), /permission denied/);
    await refused(c.q(`SELECT last_workflow_id FROM stepd.schedule_ticks`), /permission denied/);

    await alice.q(`UPDATE stepd.schedules SET paused = true WHERE name = 'nightly'`);
    // A trusted role resumes it: the ticks are still answered for by alice.
    await env.t.q(`UPDATE stepd.schedules SET paused = false, overlap = 'cancel-previous' WHERE name = 'nightly'`);
    expect(await env.t.q(`SELECT paused, overlap, catch_up, created_role, owner_role FROM stepd.schedules`)).toEqual([
      { paused: false, overlap: 'cancel-previous', catch_up: 'latest', created_role: alice.role, owner_role: alice.role },
    ]);
    // Changing what runs still stamps the writer.
    await env.t.q(`UPDATE stepd.schedules SET cron = '0 10 * * *' WHERE name = 'nightly'`);
    expect((await env.t.q(`SELECT created_role FROM stepd.schedules`))[0].created_role).toBe('postgres');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a role with no grants can neither read nor pause schedules', async () => {
    const env = await securityEnv();
    await env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('report', $1)`, [JSON.stringify(ECHO)]);
    await env.client.q(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ('nightly', '0 9 * * *', 'report')`);
    const nobody = await createLoginRole(env.t, null, `nog_${randomBytes(4).toString('hex')}`);
    const conn = new pg.Client({ connectionString: nobody.url });
    await conn.connect();
    onCleanup(() => conn.end());
    const s = pg.escapeIdentifier(env.t.schema);
    await refused(conn.query(`UPDATE ${s}.schedules SET paused = true`), /permission denied/);
    await refused(conn.query(`SELECT paused FROM ${s}.schedules`), /permission denied/);
    expect((await env.t.q(`SELECT paused FROM stepd.schedules`))[0].paused).toBe(false);
  });
});
