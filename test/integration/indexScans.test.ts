/**
 * The executor's batch transactions plan with index scans (withTransaction's preferIndexScans):
 * with statistics from before a burst — PostgreSQL still believes hardly any workflow is new or
 * running while thousands are — the admission, the lock of a batch and the end of its workflows
 * otherwise read every new or running workflow in every batch (a bitmap or sequential scan, and
 * a sort or hash of all of them): work that grows with the backlog.
 *
 * A scan that reads more rows than a batch is the sign. The plans are read with auto_explain (PostgreSQL's contrib module, loaded in the test's own
 * session), from the real statements the executor sends.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPool, withTransaction } from '../../src/db/connect.js';
import {
  admitNewWorkflowsResolvingRegisteredFlows,
  claimReadySteps,
  claimReadyStepsFairly,
  claimReadyStepsFairlyAcrossRoles,
  endWorkflowsCancellingLiveSteps,
  lockWorkflowsAndFinishSteps,
} from '../../src/db/queries.js';
import { asExecutor, createTestSchema, onCleanup, type TestSchema } from '../helpers/db.js';

const BACKLOG = 3_000;
const BATCH = 500;
const ONE_STEP = JSON.stringify({ start: 'a', steps: { a: { tool: 'core.noop', done: true } } });

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** Statistics that predate a burst: analyzed while empty, then BACKLOG new workflows, and no autovacuum to catch up. */
async function staleBacklog(t: TestSchema): Promise<void> {
  await t.q(`ALTER TABLE stepd.workflows SET (autovacuum_enabled = false)`);
  await t.q(`ALTER TABLE stepd.workflow_steps SET (autovacuum_enabled = false)`);
  await t.q(`ANALYZE stepd.workflows`);
  await t.q(`ANALYZE stepd.workflow_steps`);
  await t.q(`INSERT INTO stepd.workflows (name, flow, input, created_by) SELECT 'burst', $1::jsonb, '{}', 'test' FROM generate_series(1, $2::int)`, [ONE_STEP, BACKLOG]);
}

/** Runs `fn` in an executor transaction and returns the plans of the statements it ran (auto_explain, as notices). */
async function plansOf(pool: pg.Pool, preferIndexScans: boolean, fn: (client: pg.PoolClient) => Promise<void>): Promise<PlanNode[]> {
  const plans: PlanNode[] = [];
  await withTransaction(
    pool,
    async (client) => {
      const onNotice = (n: { message?: string }) => {
        const text = n.message ?? '';
        const at = text.indexOf('{');
        if (text.startsWith('duration') && at >= 0) plans.push((JSON.parse(text.slice(at)) as { Plan: PlanNode }).Plan);
      };
      client.on('notice', onNotice);
      try {
        await client.query(`LOAD 'auto_explain'`);
        await client.query(`SET LOCAL auto_explain.log_min_duration = 0`);
        await client.query(`SET LOCAL auto_explain.log_format = 'json'`);
        await client.query(`SET LOCAL auto_explain.log_analyze = on`);
        await client.query(`SET LOCAL auto_explain.log_timing = off`);
        await client.query(`SET LOCAL auto_explain.log_level = 'notice'`);
        await client.query(`SET LOCAL client_min_messages = 'notice'`);
        await fn(client);
      } finally {
        client.removeListener('notice', onNotice);
      }
      // Nothing of it stays: the next test step starts from the same backlog.
      throw new RolledBack();
    },
    { preferIndexScans },
  ).catch((err) => {
    if (!(err instanceof RolledBack)) throw err;
  });
  return plans;
}

class RolledBack extends Error {}

/**
 * Scans of a table (or its indexes) that read more rows than twice a batch: a batch is found
 * through its ids or through an index in order that stops after the batch.
 */
function wideScans(plans: PlanNode[], table: 'workflows' | 'workflow_steps', batch: number): string[] {
  return plans
    .flatMap(nodes)
    .filter((n) => n['Node Type'].includes('Scan') && (n['Relation Name'] === table || n['Index Name']?.startsWith(`${table}_`)))
    .map((n) => ({ n, read: ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0)) * (n['Actual Loops'] ?? 1) }))
    .filter(({ read }) => read > 2 * batch)
    .map(({ n, read }) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}: ${read} rows`);
}

const wideScansOfWorkflows = (plans: PlanNode[]) => wideScans(plans, 'workflows', BATCH);

/** A backlog of ready steps (one per running workflow) the statistics have not seen. */
async function staleReadySteps(t: TestSchema): Promise<void> {
  await t.q(`ALTER TABLE stepd.workflows SET (autovacuum_enabled = false)`);
  await t.q(`ALTER TABLE stepd.workflow_steps SET (autovacuum_enabled = false)`);
  await t.q(`ANALYZE stepd.workflows`);
  await t.q(`ANALYZE stepd.workflow_steps`);
  await asExecutor(
    t,
    `WITH w AS (INSERT INTO stepd.workflows (name, flow, input, created_by, status, started_at, step_count)
                SELECT 'burst', $1::jsonb, '{}', 'test', 'running', now(), 1 FROM generate_series(1, $2::int) RETURNING id)
     INSERT INTO stepd.workflow_steps (workflow_id, name, tool, status, ready_at) SELECT id, 'a', 'core.noop', 'ready', now() - interval '1 second' FROM w`,
    [ONE_STEP, BACKLOG],
  );
}

describe("the executor's batch transactions under statistics from before a burst", () => {
  it('admit, lock and end a batch through the primary key and the new-workflows index, not a scan of the whole backlog', async () => {
    const t = await createTestSchema();
    await staleBacklog(t);
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
    onCleanup(() => pool.end());

    const batch = async (client: pg.PoolClient) => {
      const admitted = await admitNewWorkflowsResolvingRegisteredFlows(client, BATCH);
      expect(admitted).toHaveLength(BATCH);
      const ids = admitted.map((w) => w.id);
      await lockWorkflowsAndFinishSteps(client, 'no-such-executor', ids, []);
      await endWorkflowsCancellingLiveSteps(
        client,
        ids.map((workflowId) => ({ workflowId, status: 'completed' as const, output: null })),
      );
    };

    const preferred = await plansOf(pool, true, batch);
    expect(preferred.length).toBeGreaterThanOrEqual(3);
    expect(wideScansOfWorkflows(preferred)).toEqual([]);

    // The same statements planned as PostgreSQL would by default: the fixture does reproduce the problem.
    const plain = await plansOf(pool, false, batch);
    expect(wideScansOfWorkflows(plain).length).toBeGreaterThan(0);
  });

  it('claim a batch of ready steps through the ready index in order, not a sort of every ready row', async () => {
    const t = await createTestSchema();
    await staleReadySteps(t);
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
    onCleanup(() => pool.end());
    const claimBatch = 64;
    const by = { executorId: 'no-such-executor', leaseMs: 60_000 };
    const claims = async (client: pg.PoolClient) => {
      expect(await claimReadySteps(client, { ...by, limit: claimBatch })).toHaveLength(claimBatch);
      const fair = await claimReadyStepsFairly(client, { ...by, limit: claimBatch, after: '0', workflows: claimBatch });
      expect(fair.rows).toHaveLength(claimBatch);
      // Fair across roles (lanes.ts): a lane's newest running workflows, not every one of them.
      const roles = await claimReadyStepsFairlyAcrossRoles(client, { ...by, limit: claimBatch, fromRole: '' });
      expect(roles.rows).toHaveLength(claimBatch);
    };

    expect(wideScans(await plansOf(pool, true, claims), 'workflow_steps', claimBatch)).toEqual([]);
    // As PostgreSQL plans them by default: every ready row read and sorted, at every claim.
    expect(wideScans(await plansOf(pool, false, claims), 'workflow_steps', claimBatch).length).toBeGreaterThan(0);
  });

  it('keeps the planner settings inside the transaction: the next one on the same connection plans as usual', async () => {
    const t = await createTestSchema();
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
    onCleanup(() => pool.end());
    const settings = async (client: pg.PoolClient) =>
      (await client.query<{ seq: string; bitmap: string }>(`SELECT current_setting('enable_seqscan') AS seq, current_setting('enable_bitmapscan') AS bitmap`)).rows[0];

    expect(await withTransaction(pool, settings, { preferIndexScans: true })).toEqual({ seq: 'off', bitmap: 'off' });
    expect(await withTransaction(pool, settings)).toEqual({ seq: 'on', bitmap: 'on' });
    // A transaction that fails rolls its settings back too.
    await expect(
      withTransaction(
        pool,
        async () => {
          throw new Error('boom');
        },
        { preferIndexScans: true },
      ),
    ).rejects.toThrow('boom');
    expect(await withTransaction(pool, settings)).toEqual({ seq: 'on', bitmap: 'on' });
  });
});
