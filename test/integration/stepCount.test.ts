/**
 * `workflows.step_count` is the number of the workflow's step rows, whatever its admission did:
 * the admission counts the first step row in advance (so a one-step workflow's row is written
 * once there), and takes the count back when the workflow got no row. Checked with a real
 * executor for each way an admission can end, for a batch that mixes them, with the executor's
 * connections killed mid-transaction, and when one row makes the batch's admission fail (then a
 * row the database refuses to change at all is left alone and every other one admitted).
 */
import { describe, expect, it } from 'vitest';
import { asExecutor, createTestSchema, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

async function counts(t: TestSchema, id: string): Promise<{ counted: number; rows: number }> {
  const [r] = await t.q<{ counted: number; rows: number }>(
    `SELECT w.step_count AS counted, (SELECT count(*)::int FROM stepd.workflow_steps s WHERE s.workflow_id = w.id) AS rows
       FROM stepd.workflows w WHERE w.id = $1`,
    [id],
  );
  return r!;
}

const ONE_STEP = { start: 'a', steps: { a: { tool: 'core.noop', done: true } } };
const CHAIN = { start: 'a', steps: { a: { tool: 'core.noop', next: 'b' }, b: { tool: 'core.echo', args: { x: 1 }, done: true } } };
const PARALLEL_START = {
  start: 'fan',
  steps: {
    fan: { parallel: ['l', 'r'], join: 'end' },
    l: { tool: 'core.noop' },
    r: { tool: 'core.noop' },
    end: { tool: 'core.noop', done: true },
  },
};
const FOR_EACH_START = {
  start: 'each',
  steps: { each: { forEach: { items: '{{input.items}}', step: 'work' }, join: 'end' }, work: { tool: 'core.echo', args: { i: '{{item}}' } }, end: { tool: 'core.noop', done: true } },
};
const GATE_START = { start: 'ok', steps: { ok: { approval: { message: 'go?' }, next: 'a' }, a: { tool: 'core.noop', done: true } } };
const INVALID = { start: 'missing', steps: { a: { tool: 'core.noop', done: true } } };
const SCHEMA_REFUSES = { inputSchema: { type: 'object', required: ['must'] }, ...ONE_STEP };

describe('step_count after admission', () => {
  it('equals the step rows of workflows admitted in one batch: one step, a chain, forks at the start, a gate, and refused ones', async () => {
    const t = await createTestSchema();
    const ids = {
      oneStep: await insertWorkflow(t, ONE_STEP),
      chain: await insertWorkflow(t, CHAIN),
      parallel: await insertWorkflow(t, PARALLEL_START),
      forEach: await insertWorkflow(t, FOR_EACH_START, { items: [1, 2, 3] }),
      emptyForEach: await insertWorkflow(t, FOR_EACH_START, { items: [] }),
      invalid: await insertWorkflow(t, INVALID),
      inputRefused: await insertWorkflow(t, SCHEMA_REFUSES, {}),
      unknownByName: (await t.q<{ id: string }>(`INSERT INTO stepd.workflows (name) VALUES ('no-such-flow') RETURNING id`))[0]!.id,
    };
    const gate = await insertWorkflow(t, GATE_START);
    // Inserted before the executor starts: its first admission takes them all in one batch.
    await startExecutor(t);
    for (const id of Object.values(ids)) await waitForWorkflow(t, id);
    await waitForWorkflow(t, gate, ['running']);
    for (const [what, id] of Object.entries({ ...ids, gate })) {
      const c = await counts(t, id);
      expect({ what, ...c }).toEqual({ what, counted: c.rows, rows: c.rows });
    }
    expect((await counts(t, ids.oneStep)).rows).toBe(1);
    expect((await counts(t, ids.invalid)).counted).toBe(0);
    expect((await counts(t, ids.unknownByName)).counted).toBe(0);
    expect((await counts(t, ids.inputRefused)).counted).toBe(0);
    expect((await counts(t, gate)).counted).toBe(1);
  });

  it('stays equal to the rows when many one-step workflows are admitted in full batches', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'many', $1::jsonb FROM generate_series(1, 1200)`, [JSON.stringify(ONE_STEP)]);
    await startExecutor(t);
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE status <> 'completed' LIMIT 1`)).length === 0, 'every workflow to complete');
    const [r] = await t.q<{ off: number; rows: number }>(
      `SELECT count(*) FILTER (WHERE w.step_count <> (SELECT count(*) FROM stepd.workflow_steps s WHERE s.workflow_id = w.id))::int AS off,
              (SELECT count(*)::int FROM stepd.workflow_steps) AS rows
         FROM stepd.workflows w`,
    );
    expect(r).toEqual({ off: 0, rows: 1200 });
  });

  it('stays equal to the rows when PostgreSQL kills the executor\'s connections in the middle of its transactions', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'killed', $1::jsonb FROM generate_series(1, 3000)`, [JSON.stringify(ONE_STEP)]);
    await startExecutor(t);
    // Backends inside a transaction on this schema's tables: an admission or an outcome batch in flight.
    let kills = 0;
    await waitFor(async () => {
      const killed = await t.q<{ pid: number }>(
        `SELECT pg_terminate_backend(l.pid), l.pid FROM (SELECT DISTINCT l.pid FROM pg_locks l
            JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = $1 AND c.relname IN ('workflows', 'workflow_steps') AND l.pid <> pg_backend_pid()) l`,
        [t.schema],
      );
      kills += killed.length;
      const [left] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status <> 'completed'`);
      return kills >= 3 || left!.n === 0;
    }, 'three connections killed mid-transaction');
    expect(kills).toBeGreaterThan(0);
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE status <> 'completed' LIMIT 1`)).length === 0, 'every workflow to complete');
    const [r] = await t.q<{ off: number; twice: number; rows: number }>(
      `SELECT count(*) FILTER (WHERE w.step_count <> (SELECT count(*) FROM stepd.workflow_steps s WHERE s.workflow_id = w.id))::int AS off,
              count(*) FILTER (WHERE (SELECT count(*) FROM stepd.workflow_steps s WHERE s.workflow_id = w.id AND s.status = 'done') <> 1)::int AS twice,
              (SELECT count(*)::int FROM stepd.workflow_steps WHERE status = 'done') AS rows
         FROM stepd.workflows w`,
    );
    expect(r).toEqual({ off: 0, twice: 0, rows: 3000 });
  });

  it('stays equal to the rows when one row of a batch makes its admission fail and the batch is admitted one by one', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'before', $1::jsonb FROM generate_series(1, 20)`, [JSON.stringify(ONE_STEP)]);
    // Written past the guard (which would reset created_at), as a repair or an old version might:
    // started_at >= created_at cannot hold for it, so the batch's admission statement fails.
    const [bad] = await asExecutor<{ id: string }>(t, `INSERT INTO stepd.workflows (name, flow, created_at) VALUES ('future', $1::jsonb, now() + interval '1 day') RETURNING id`, [JSON.stringify(ONE_STEP)]);
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'after', $1::jsonb FROM generate_series(1, 20)`, [JSON.stringify(ONE_STEP)]);
    await startExecutor(t);
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE status IN ('new', 'running') LIMIT 1`)).length === 0, 'every workflow to end');
    const rows = await t.q<{ id: string; status: string; counted: number; steps: number }>(
      `SELECT w.id, w.status, w.step_count AS counted, (SELECT count(*)::int FROM stepd.workflow_steps s WHERE s.workflow_id = w.id) AS steps
         FROM stepd.workflows w ORDER BY w.id`,
    );
    for (const row of rows) expect(row.counted, `workflow ${row.id}`).toBe(row.steps);
    expect(rows.filter((x) => x.status === 'completed')).toHaveLength(40);
    expect(rows.find((x) => x.id === bad!.id)).toMatchObject({ status: 'failed', counted: 0, steps: 0 });
  });

  it('leaves alone a new workflow the database refuses to change at all, and admits every other one', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'before', $1::jsonb FROM generate_series(1, 20)`, [JSON.stringify(ONE_STEP)]);
    // A row stored before a CHECK it breaks was added NOT VALID (as 0017 adds its size ceilings):
    // every UPDATE of it, the admission's and the failure's alike, is refused.
    await t.q(`ALTER TABLE stepd.workflows DROP CONSTRAINT workflows_input_is_object`);
    const [bad] = await t.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('unchangeable', $1::jsonb, '[]') RETURNING id`, [JSON.stringify(ONE_STEP)]);
    await t.q(`ALTER TABLE stepd.workflows ADD CONSTRAINT workflows_input_is_object CHECK (jsonb_typeof(input) = 'object') NOT VALID`);
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'after', $1::jsonb FROM generate_series(1, 20)`, [JSON.stringify(ONE_STEP)]);
    await startExecutor(t);
    await waitFor(
      async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE status <> 'completed' AND id <> $1 LIMIT 1`, [bad!.id])).length === 0,
      'every other workflow to complete',
    );
    const [row] = await t.q<{ status: string; steps: number }>(
      `SELECT status, (SELECT count(*)::int FROM stepd.workflow_steps s WHERE s.workflow_id = w.id) AS steps FROM stepd.workflows w WHERE id = $1`,
      [bad!.id],
    );
    expect(row).toEqual({ status: 'new', steps: 0 });
    // Still admitting: a workflow inserted now completes.
    const later = await insertWorkflow(t, ONE_STEP);
    expect((await waitForWorkflow(t, later)).status).toBe('completed');
  });
});
