import { describe, expect, it } from 'vitest';
import { createClientRole, createSecuredSchema, startConfiguredExecutor } from '../security/helpers.js';
import { getSteps, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import type { WorkflowRow } from '../../src/db/tables.js';

const CHILD = { start: 'ok', steps: { ok: { approval: true, next: 'say' }, say: { tool: 'core.echo', args: { n: '{{input.n}}' } } } };
const PARENT = { start: 'sub', steps: { sub: { workflow: { name: 'child', input: { n: 1 } } } } };

async function setUp(clients: (role: string) => Record<string, { actAs: string[] }> = () => ({})) {
  const t = await createSecuredSchema();
  await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('child', $1)`, [JSON.stringify(CHILD)]);
  const client = await createClientRole(t);
  await startConfiguredExecutor(t, { clients: clients(client.role) });
  return { t, client };
}

async function childOf(t: TestSchema, parentId: string): Promise<WorkflowRow> {
  return waitFor(async () => (await t.q<WorkflowRow>(`SELECT * FROM stepd.workflows WHERE parent_id = $1`, [parentId]))[0], 'the child');
}

describe('sub-workflows and the trust boundary', () => {
  it('a child runs as its parent, with the role that wrote the parent answering for it', async () => {
    const { t, client } = await setUp();
    const id = (await client.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow) VALUES ('p', $1) RETURNING id`, [JSON.stringify(PARENT)]))[0]!.id;
    const child = await childOf(t, id);
    await waitForStep(t, child.id, 'ok', 'pending');
    const parent = (await t.q<WorkflowRow>(`SELECT * FROM stepd.workflows WHERE id = $1`, [id]))[0]!;
    expect(parent).toMatchObject({ created_role: client.role, created_by: client.role });
    expect(await t.q(`SELECT created_role, created_by, status FROM stepd.workflows WHERE id = $1`, [child.id])).toEqual([
      { created_role: client.role, created_by: client.role, status: 'running' },
    ]);
  });

  it('a child of a workflow started as another user (clients.actAs) runs as that user under the same role; a refused parent starts no child', async () => {
    const { t, client } = await setUp((role) => ({ [role]: { actAs: ['alice'] } }));
    const start = async (user: string) =>
      (await client.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, created_by) VALUES ('p', $1, $2) RETURNING id`, [JSON.stringify(PARENT), user]))[0]!.id;
    const id = await start('alice');
    const child = await childOf(t, id);
    await waitForStep(t, child.id, 'ok', 'pending');
    expect(await t.q(`SELECT created_role, created_by, status FROM stepd.workflows WHERE id = $1`, [child.id])).toEqual([
      { created_role: client.role, created_by: 'alice', status: 'running' },
    ]);

    const refused = await start('bob');
    expect((await waitForWorkflow(t, refused)).error).toMatchObject({ code: 'permission_denied' });
    expect(await t.q(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [refused])).toEqual([]);
  });

  it('a client cannot complete the waiting step: not by readying it, not with a forged executor marker, not by clearing child_id', async () => {
    const { t, client } = await setUp();
    const id = (await client.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow) VALUES ('p', $1) RETURNING id`, [JSON.stringify(PARENT)]))[0]!.id;
    const child = await childOf(t, id);
    await waitForStep(t, child.id, 'ok', 'pending');
    const [sub] = await getSteps(t, id);
    expect(sub).toMatchObject({ status: 'pending', child_id: child.id });

    await expect(client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [sub!.id])).rejects.toThrow(/waits for sub-workflow/);
    await expect(
      client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"forged": true}' WHERE id = $1`, [sub!.id]),
    ).rejects.toThrow(/waits for sub-workflow/);
    await expect(
      client.session(async (run) => {
        await run(`SET stepd.executor = 'on'`);
        return run(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"forged": true}' WHERE id = $1`, [sub!.id]);
      }),
    ).rejects.toThrow(/waits for sub-workflow/);
    await expect(client.q(`UPDATE stepd.workflow_steps SET child_id = NULL WHERE id = $1`, [sub!.id])).rejects.toThrow(/permission denied/);

    // The child's own gate is the contract's: approving it completes the child, then the parent.
    await client.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE workflow_id = $1 AND name = 'ok' AND status = 'pending'`, [child.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { n: 1 } });
  });
});
