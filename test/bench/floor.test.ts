/**
 * The bench's floor (scenario 0) does the row work it claims: on stepd's schema as the executor
 * role, and on the bare tables, every workflow ends completed with exactly one done step, the
 * chain floor finishes one step and inserts the next per hop, and the same work from a client
 * connection is refused by the guards the floor meets as the executor.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  createBareTables,
  executorFloorClient,
  hopFloorPass,
  plainFloorClient,
  workflowFloorPass,
  workflowFloorSql,
} from '../../scripts/bench/floor.js';
import { createTestSchema, onCleanup, TEST_DATABASE_URL } from '../helpers/db.js';

async function client(make: () => Promise<pg.Client>): Promise<pg.Client> {
  const c = await make();
  onCleanup(() => c.end());
  return c;
}

async function counts(loader: pg.Client, schema: string) {
  const { rows } = await loader.query<Record<string, number>>(
    `SELECT (SELECT count(*)::int FROM ${schema}.workflows) AS workflows,
            (SELECT count(*)::int FROM ${schema}.workflows WHERE status = 'completed' AND started_at IS NOT NULL
                AND completed_at >= started_at AND step_count = 1) AS completed,
            (SELECT count(*)::int FROM ${schema}.workflow_steps) AS steps,
            (SELECT count(*)::int FROM ${schema}.workflow_steps WHERE status = 'done' AND lease_until IS NULL
                AND executor_id = 'bench-floor' AND completed_at >= started_at) AS done,
            (SELECT count(*)::int FROM (SELECT workflow_id FROM ${schema}.workflow_steps GROUP BY workflow_id HAVING count(*) = 1) x) AS one_step_each`,
  );
  return rows[0]!;
}

describe('bench floor', () => {
  it('on stepd\'s schema as the executor role and on the bare tables, ends every workflow with one done step', async () => {
    const t = await createTestSchema();
    const bare = `${t.schema}_bare`;
    const loader = await client(() => plainFloorClient(TEST_DATABASE_URL));
    onCleanup(async () => void (await t.db.query(`DROP SCHEMA IF EXISTS ${bare} CASCADE`)));
    await createBareTables(loader, bare, t.schema);
    const executor = await client(() => executorFloorClient(TEST_DATABASE_URL, t.schema));
    const { rows: [who] } = await executor.query<{ role: string; trusted: boolean }>(`SELECT current_user AS role, ${t.schema}.stepd_is_executor() AS trusted`);
    expect(who).toEqual({ role: `${t.schema}_executor`, trusted: true });

    // 130 workflows in batches of 50: three takes, the last one short.
    for (const [schema, writer] of [[t.schema, executor], [bare, loader]] as const) {
      const pass = await workflowFloorPass(loader, writer, schema, 130, 50);
      expect(pass.workflows).toBe(130);
      expect(pass.elapsedMs).toBeGreaterThan(0);
      expect(await counts(loader, schema)).toEqual({ workflows: 130, completed: 130, steps: 130, done: 130, one_step_each: 130 });
      // Each half is its own transaction: 3 takes, so 3 distinct claim times and 3 distinct finish times.
      const { rows: [tx] } = await loader.query<{ claims: number; finishes: number; ends: number }>(
        `SELECT count(DISTINCT s.started_at)::int AS claims, count(DISTINCT s.completed_at)::int AS finishes,
                count(DISTINCT w.completed_at)::int AS ends
           FROM ${schema}.workflow_steps s JOIN ${schema}.workflows w ON w.id = s.workflow_id`,
      );
      expect(tx).toEqual({ claims: 3, finishes: 3, ends: 3 });
    }
    // The bare shape has stepd's columns and none of its triggers, CHECKs or foreign keys.
    const { rows: [shape] } = await loader.query<{ triggers: number; checks: number; fks: number; indexes: number }>(
      `SELECT (SELECT count(*)::int FROM pg_trigger WHERE tgrelid IN ($1::regclass, $2::regclass)) AS triggers,
              (SELECT count(*)::int FROM pg_constraint WHERE conrelid IN ($1::regclass, $2::regclass) AND contype IN ('c', 'f')) AS checks,
              (SELECT count(*)::int FROM pg_constraint WHERE conrelid IN ($1::regclass, $2::regclass) AND contype = 'f') AS fks,
              (SELECT count(*)::int FROM pg_index WHERE indrelid IN ($1::regclass, $2::regclass)) AS indexes`,
      [`${bare}.workflows`, `${bare}.workflow_steps`],
    );
    expect(shape).toEqual({ triggers: 0, checks: 0, fks: 0, indexes: 3 });
  });

  it('the chain floor finishes one step and inserts the next, claimed, per hop', async () => {
    const t = await createTestSchema();
    const loader = await client(() => plainFloorClient(TEST_DATABASE_URL));
    const executor = await client(() => executorFloorClient(TEST_DATABASE_URL, t.schema));
    const pass = await hopFloorPass(loader, executor, t.schema, 25);
    expect(pass.workflows).toBe(25);
    const { rows: [r] } = await loader.query<{ steps: number; done: number; distinct_ends: number; step_count: number; status: string }>(
      `SELECT count(*)::int AS steps, count(*) FILTER (WHERE s.status = 'done')::int AS done,
              count(DISTINCT s.completed_at)::int AS distinct_ends, min(w.step_count) AS step_count, min(w.status) AS status
         FROM ${t.schema}.workflow_steps s JOIN ${t.schema}.workflows w ON w.id = s.workflow_id`,
    );
    // The first step, 25 hops each inserting one; all done, each finished in its own transaction
    // (the last by the untimed end).
    expect(r).toEqual({ steps: 26, done: 26, distinct_ends: 26, step_count: 26, status: 'completed' });
  });

  it('is refused outside the executor: the guards and grants the floor passes as the executor role are live', async () => {
    const t = await createTestSchema();
    const loader = await client(() => plainFloorClient(TEST_DATABASE_URL));
    await loader.query(`INSERT INTO ${t.schema}.workflows (name, flow) VALUES ('x', '{"start":"a","steps":{"a":{"tool":"core.noop","done":true}}}')`);
    // Unmarked (a superuser's session, as the CLI's): the guard trigger refuses the take.
    await expect(loader.query(workflowFloorSql(t.schema, 10))).rejects.toThrow(/outside the executor/);
    // Marked but as the client role: the marker alone grants nothing.
    const c = await client(async () => {
      const x = new pg.Client({ connectionString: TEST_DATABASE_URL, options: '-c stepd.executor=on' });
      await x.connect();
      await x.query(`SET ROLE ${t.schema}_client`);
      return x;
    });
    await expect(c.query(workflowFloorSql(t.schema, 10))).rejects.toThrow(/permission denied/);
    const { rows } = await loader.query(`SELECT status FROM ${t.schema}.workflows`);
    expect(rows).toEqual([{ status: 'new' }]);
  });
});
