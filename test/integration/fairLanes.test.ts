/**
 * The lanes of admission and of the role-fair claim (src/db/queries/lanes.ts), statement by
 * statement: roles take turns even when a batch is smaller than the roles waiting, and another
 * role's one ready step is claimed among thousands of one role's.
 */
import { describe, expect, it } from 'vitest';
import { createPool, withTransaction } from '../../src/db/connect.js';
import { admitNewWorkflowsResolvingRegisteredFlows, claimReadyStepsFairlyAcrossRoles, lockClaimCandidatesFairlyAcrossRoles } from '../../src/db/queries.js';
import { asExecutor, createTestSchema, onCleanup, type TestSchema } from '../helpers/db.js';

const ONE_STEP = JSON.stringify({ start: 'a', steps: { a: { tool: 'core.noop', done: true } } });

/** `n` new workflows written as `role` (the database's created_role), for `user`. */
async function newWorkflows(t: TestSchema, role: string, n: number, user = 'u'): Promise<void> {
  await asExecutor(t, `INSERT INTO stepd.workflows (name, flow, created_by, created_role) SELECT 'w', $1::jsonb, $3, $2 FROM generate_series(1, $4::int)`, [ONE_STEP, role, user, n]);
}

/** `n` running workflows of `role`, each with a ready step. */
async function readyWorkflows(t: TestSchema, role: string, n: number, user = 'u'): Promise<void> {
  await asExecutor(
    t,
    `WITH w AS (INSERT INTO stepd.workflows (name, flow, created_by, created_role, status, started_at, step_count)
                SELECT 'w', $1::jsonb, $3, $2, 'running', now(), 1 FROM generate_series(1, $4::int) RETURNING id)
     INSERT INTO stepd.workflow_steps (workflow_id, name, tool, status, ready_at) SELECT id, 'a', 'core.noop', 'ready', now() - interval '1 second' FROM w`,
    [ONE_STEP, role, user, n],
  );
}

function executorPool(t: TestSchema) {
  const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
  onCleanup(() => pool.end());
  return pool;
}

describe('fair lanes', () => {
  it('admits the roles in turns, one workflow a batch, however many one role inserted first', async () => {
    const t = await createTestSchema();
    await newWorkflows(t, 'role_a', 200);
    await newWorkflows(t, 'role_c', 1);
    await newWorkflows(t, 'role_b', 1);
    const pool = executorPool(t);
    let after = '';
    const served: string[] = [];
    for (let i = 0; i < 4; i++) {
      const [row] = await withTransaction(pool, (c) => admitNewWorkflowsResolvingRegisteredFlows(c, 1, { afterRole: after }));
      served.push(row!.created_role!);
      after = row!.created_role!;
    }
    expect(served).toEqual(['role_a', 'role_b', 'role_c', 'role_a']);
  });

  it("gives each role an equal share of a batch, each of a role's users an equal share of that, and fills the rest with the oldest", async () => {
    const t = await createTestSchema();
    await newWorkflows(t, 'role_a', 50, 'x');
    await newWorkflows(t, 'role_a', 50, 'y');
    await newWorkflows(t, 'role_b', 3);
    const pool = executorPool(t);
    const rows = await withTransaction(pool, (c) => admitNewWorkflowsResolvingRegisteredFlows(c, 20));
    const count = (role: string, user?: string) => rows.filter((r) => r.created_role === role && (user === undefined || r.created_by === user)).length;
    expect(rows).toHaveLength(20);
    expect(count('role_b')).toBe(3);
    // role_a: its share (10, five per user) and the 7 that role_b left, the oldest (user x's).
    expect(count('role_a', 'x')).toBe(12);
    expect(count('role_a', 'y')).toBe(5);
  });

  it("claims another role's only ready step among thousands of one role's, in a batch of one", async () => {
    const t = await createTestSchema();
    await readyWorkflows(t, 'role_a', 3_000);
    await readyWorkflows(t, 'role_b', 1);
    const pool = executorPool(t);
    const by = { executorId: 'x', leaseMs: 60_000 };
    const roleOf = async (workflowId: string) => (await t.q(`SELECT created_role FROM stepd.workflows WHERE id = $1`, [workflowId]))[0].created_role;
    const first = await withTransaction(pool, (c) => claimReadyStepsFairlyAcrossRoles(c, { ...by, limit: 1, fromRole: '' }));
    expect(first.rows).toHaveLength(1);
    expect(await roleOf(first.rows[0]!.workflow_id)).toBe('role_a');
    expect(first.nextRole).toBe('role_b');
    const second = await withTransaction(pool, (c) => claimReadyStepsFairlyAcrossRoles(c, { ...by, limit: 1, fromRole: first.nextRole! }));
    expect(await roleOf(second.rows[0]!.workflow_id)).toBe('role_b');
    // Both roles in a batch of two.
    await readyWorkflows(t, 'role_b', 1);
    const both = await withTransaction(pool, (c) => claimReadyStepsFairlyAcrossRoles(c, { ...by, limit: 2, fromRole: '' }));
    expect((await Promise.all(both.rows.map((r) => roleOf(r.workflow_id)))).sort()).toEqual(['role_a', 'role_b']);
    expect(both.rolesClaimed).toBe(2);
  });

  it("locks a limited claim's candidates across roles, leaving out saturated users and tools", async () => {
    const t = await createTestSchema();
    await readyWorkflows(t, 'role_a', 500, 'busy');
    await readyWorkflows(t, 'role_a', 1, 'idle');
    await readyWorkflows(t, 'role_b', 1);
    const pool = executorPool(t);
    const users = async (skipUsers: string[], skipToolsLike: string[] = []) =>
      withTransaction(pool, async (c) => (await lockClaimCandidatesFairlyAcrossRoles(c, { limit: 4, fromRole: '', skipToolsLike, skipUsers })).candidates.map((x) => x.created_by).sort());
    expect(await users([])).toEqual(['busy', 'idle', 'u']);
    expect(await users(['busy'])).toEqual(['idle', 'u']);
    expect(await users([], ['core.%'])).toEqual([]);
  });
});
