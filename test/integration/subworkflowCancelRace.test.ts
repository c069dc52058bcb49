/**
 * A client cancels a parent while the executor ends its child. The executor's transaction holds
 * the child's row and then readies the parent's waiting step (workflows_settle_parent_step); the
 * cancel holds the parent's row and cancels the child (sql/0047). Both take the rows in the same
 * order, parent's step last, so neither waits for the other in a cycle: no 40P01 for anyone.
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { createTestSchema, getSteps, getWorkflow, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, type TestSchema } from '../helpers/db.js';

const CHILD = { start: 'ok', steps: { ok: { approval: { timeout: '1h' }, done: true } } };
const PARENT = { start: 'sub', steps: { sub: { workflow: { name: 'race-child' }, next: 'after' }, after: { tool: 'core.echo', args: {} } } };

async function session(t: TestSchema): Promise<{ conn: pg.PoolClient; pid: number }> {
  const conn = await t.db.connect();
  onCleanup(async () => {
    await conn.query('ROLLBACK').catch(() => {});
    conn.release(true);
  });
  const { rows } = await conn.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return { conn, pid: rows[0]!.pid };
}

async function parentWithRunningChild(t: TestSchema): Promise<{ parent: string; child: string }> {
  await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('race-child', $1)`, [JSON.stringify(CHILD)]);
  const executor = await startExecutor(t);
  const parent = await insertWorkflow(t, PARENT, {});
  const child = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE parent_id = $1`, [parent]))[0]?.id, 'the child');
  await waitForStep(t, child, 'ok', 'pending');
  await executor.stop({ graceMs: 0 });
  return { parent, child };
}

/**
 * The race, step by step: the executor's outcome transaction locks `children` (lock-and-finish,
 * in id order), the client's cancel of `parent` reaches a child's row and waits for it, then the
 * children end (their settle trigger readies the parent's waiting steps) and commit. Returns how
 * each side ended: 'ok' or its error message.
 */
async function cancelWhileChildrenEnd(t: TestSchema, parent: string, children: string[]): Promise<{ end: string; cancel: string }> {
  const ending = await session(t);
  await ending.conn.query('BEGIN');
  await ending.conn.query(`SET LOCAL stepd.executor = 'on'`);
  await ending.conn.query(`SELECT 1 FROM ${t.schema}.workflows WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`, [children]);
  const client = await session(t);
  const cancel = client.conn.query(`UPDATE ${t.schema}.workflows SET status = 'cancelled' WHERE id = $1`, [parent]).then(() => 'ok', (err: Error) => err.message);
  await waitFor(
    async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND $2::int = ANY (pg_blocking_pids(pid))`, [client.pid, ending.pid]))[0],
    'the cancel waiting for a child row',
    10_000,
  );
  const end = await ending.conn
    .query(`UPDATE ${t.schema}.workflows SET status = 'completed', output = '{}', completed_at = now(), updated_at = now() WHERE id = ANY($1::bigint[])`, [children])
    .then(() => ending.conn.query('COMMIT'))
    .then(() => 'ok', (err: Error) => err.message);
  return { end, cancel: await cancel };
}

describe("a client's cancel of a parent while its child ends", () => {
  it('neither side deadlocks: the child ends, then the parent and its waiting step are cancelled', async () => {
    const t = await createTestSchema();
    const { parent, child } = await parentWithRunningChild(t);
    expect(await cancelWhileChildrenEnd(t, parent, [child])).toEqual({ end: 'ok', cancel: 'ok' });
    expect(await getWorkflow(t, child)).toMatchObject({ status: 'completed' });
    expect(await getWorkflow(t, parent)).toMatchObject({ status: 'cancelled' });
    expect((await getSteps(t, parent)).map((s) => [s.name, s.status])).toEqual([['sub', 'cancelled']]);
  });

  it('the cancel still cancels a live child and its steps, and the parent step is not readied by it', async () => {
    const t = await createTestSchema();
    const { parent, child } = await parentWithRunningChild(t);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [parent]);
    expect(await getWorkflow(t, child)).toMatchObject({ status: 'cancelled' });
    expect((await getSteps(t, child)).map((s) => s.status)).toEqual(['cancelled']);
    const [sub] = await getSteps(t, parent);
    expect(sub).toMatchObject({ status: 'cancelled', result: null });
  });

  it('with two children, the executor ending both in one batch (locked in id order) and a cancel meet without a deadlock', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('race-child', $1)`, [JSON.stringify(CHILD)]);
    const executor = await startExecutor(t);
    const parent = await insertWorkflow(t, {
      start: 'both',
      steps: { both: { parallel: ['a', 'b'], join: 'end' }, a: { workflow: { name: 'race-child' } }, b: { workflow: { name: 'race-child' } }, end: { tool: 'core.noop' } },
    });
    const children = await waitFor(async () => {
      const rows = await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE parent_id = $1 ORDER BY id`, [parent]);
      return rows.length === 2 ? rows.map((r) => r.id) : undefined;
    }, 'two children');
    for (const c of children) await waitForStep(t, c, 'ok', 'pending');
    await executor.stop({ graceMs: 0 });
    expect(await cancelWhileChildrenEnd(t, parent, children)).toEqual({ end: 'ok', cancel: 'ok' });
    for (const c of children) expect(await getWorkflow(t, c)).toMatchObject({ status: 'completed' });
    expect(await getWorkflow(t, parent)).toMatchObject({ status: 'cancelled' });
    expect((await getSteps(t, parent)).every((s) => s.status === 'cancelled' || s.status === 'done')).toBe(true);
  });

  it('cancelling a grandparent cancels its child and grandchild, each with its steps', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('race-child', $1)`, [JSON.stringify(CHILD)]);
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('race-middle', $1)`, [JSON.stringify({ start: 'sub', steps: { sub: { workflow: { name: 'race-child' }, done: true } } })]);
    const executor = await startExecutor(t);
    const top = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'race-middle' }, done: true } } });
    const middle = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE parent_id = $1`, [top]))[0]?.id, 'the middle');
    const leaf = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id::text FROM stepd.workflows WHERE parent_id = $1`, [middle]))[0]?.id, 'the leaf');
    await waitForStep(t, leaf, 'ok', 'pending');
    await executor.stop({ graceMs: 0 });
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [top]);
    for (const id of [top, middle, leaf]) {
      expect(await getWorkflow(t, id)).toMatchObject({ status: 'cancelled' });
      expect((await getSteps(t, id)).map((s) => s.status)).toEqual(['cancelled']);
    }
  });
});
