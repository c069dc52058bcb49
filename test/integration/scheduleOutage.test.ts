/**
 * Schedules through a database outage, on a private PostgreSQL cluster that is stopped and
 * started again: pg-boss's errors are logged (not once per poll) and never kill the process, and
 * the schedule ticks again once the database is back. Takes up to two minutes of real time.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSchedule } from '../../src/schedules/scheduleStore.js';
import { Scheduler } from '../../src/schedules/scheduler.js';
import { onCleanup, startExecutor, waitFor } from '../helpers/db.js';
import { createClusterSchema, startPrivateCluster, type PrivateCluster } from '../helpers/privateCluster.js';

const echoFlow = { start: 'say', steps: { say: { tool: 'core.echo', args: { n: 1 }, done: true } } };

function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

describe('schedules through a database outage', () => {
  let cluster: PrivateCluster;
  beforeAll(async () => {
    cluster = await startPrivateCluster();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  it('keep the daemon alive while the database is down and tick again once it is back', async () => {
    const t = await createClusterSchema(cluster);
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('tick', $1)`, [JSON.stringify(echoFlow)]);
    const c = new pg.Client({ connectionString: cluster.url });
    await c.connect();
    try {
      await c.query(`SET search_path TO ${pg.escapeIdentifier(t.schema)}`);
      await addSchedule(c, t.schema, { name: 'm', cron: '* * * * *', tz: 'UTC', flow: 'tick', input: {}, createdBy: null });
    } finally {
      await c.end();
    }
    await startExecutor(t);
    const { log, lines } = capturingLogger();
    const scheduler = new Scheduler({ databaseUrl: cluster.url, schema: t.schema, log, cronMonitorIntervalSeconds: 1, cronWorkerIntervalSeconds: 1, pollIntervalSeconds: 0.5 });
    scheduler.start();
    onCleanup(() => scheduler.stop());
    const ticks = async () => (await t.q<{ key: string }>(`SELECT key FROM stepd.workflows WHERE key LIKE 'schedule:m:%' ORDER BY id`)).map((r) => r.key);
    const [first] = await waitFor(async () => ((await ticks()).length >= 1 ? ticks() : undefined), 'the first tick', 90_000);

    await cluster.stop('fast');
    // pg-boss polls every half second: its errors are reported, and logged at warn once a minute at most.
    await waitFor(() => lines.some((l) => l.msg === 'pg-boss reported an error (it retries on its own)'), 'pg-boss to notice the outage');
    await cluster.start();

    const after = await waitFor(async () => {
      const keys = await ticks();
      return keys.length >= 2 ? keys : undefined;
    }, 'a tick after the outage', 150_000);
    expect(after[0]).toBe(first);
    expect(new Set(after).size).toBe(after.length);
    expect(lines.filter((l) => l.msg === 'pg-boss reported an error (it retries on its own)').length).toBeLessThanOrEqual(3);
    expect(scheduler.started).toBe(true);
  }, 300_000);
});
