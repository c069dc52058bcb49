/**
 * Clients read whether executors are alive (`stepd run --follow` says when none is): a column
 * grant on executors (id, last_beat_at, dead_after_ms) and nothing more. A role granted
 * stepd_client can neither see where executors run (host, pid) nor forge, change or delete a
 * heartbeat; a role with no grants reads nothing.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { readExecutorLivenessByBeat } from '../../src/db/queries/liveExecutors.js';
import { startExecutor } from '../helpers/db.js';
import { createClientRole, createLoginRole, createSecuredSchema, onCleanup, refused } from './helpers.js';

describe('executor liveness as a client reads it', () => {
  it('a stepd_client role reads liveness, not host or pid, and cannot write heartbeats', async () => {
    const t = await createSecuredSchema();
    await startExecutor(t);
    const client = await createClientRole(t);
    const conn = new pg.Pool({ connectionString: client.url, options: `-c search_path=${t.schema}` });
    conn.on('error', () => {}); // the role's cleanup may terminate an idle connection first (57P01)
    onCleanup(() => conn.end());
    expect((await readExecutorLivenessByBeat(conn)).alive).toBe(1);

    await refused(client.q(`SELECT host FROM stepd.executors`), /permission denied/);
    await refused(client.q(`SELECT pid FROM stepd.executors`), /permission denied/);
    await refused(client.q(`SELECT * FROM stepd.executors`), /permission denied/);
    await refused(
      client.q(`INSERT INTO stepd.executors (id, host, pid, heartbeat_interval_ms, dead_after_ms) VALUES ('fake', 'h', 1, 1000, 15000)`),
      /permission denied/,
    );
    await refused(client.q(`UPDATE stepd.executors SET last_beat_at = now() - interval '1 day'`), /permission denied/);
    await refused(client.q(`DELETE FROM stepd.executors`), /permission denied/);
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.executors`))[0].n).toBe(1);
  });

  it('a role with no grants reads nothing', async () => {
    const t = await createSecuredSchema();
    const nobody = await createLoginRole(t, null, `nog_${t.schema}`);
    const conn = new pg.Pool({ connectionString: nobody.url, options: `-c search_path=${t.schema}` });
    conn.on('error', () => {}); // the role's cleanup may terminate an idle connection first (57P01)
    onCleanup(() => conn.end());
    // Without USAGE on the schema the table is not even found (search_path skips the schema).
    await expect(readExecutorLivenessByBeat(conn)).rejects.toThrow(/permission denied|does not exist/);
    await refused(nobodyQualified(nobody.url, t.schema), /permission denied/);
  });
});

async function nobodyQualified(url: string, schema: string): Promise<unknown> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(`SELECT last_beat_at FROM ${pg.escapeIdentifier(schema)}.executors`);
  } finally {
    await c.end();
  }
}
