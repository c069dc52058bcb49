/**
 * `stepd status` and `stepd list` of a workflow whose sub-workflow waits at a gate: the built
 * CLI against the real database, an executor in-process.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForStep } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

describe('stepd status and list with sub-workflows', () => {
  it("shows a gate waiting inside a child in the parent's tree, waiting list and list row", async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('review', $1)`, [
      JSON.stringify({ start: 'ok', steps: { ok: { approval: true, next: 'say' }, say: { tool: 'core.echo', args: { v: 1 } } } }),
    ]);
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'sub', steps: { sub: { workflow: { name: 'review' } } } }, {}, { name: 'outer' });
    const child = await waitFor(async () => (await t.q<{ id: string }>(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [id]))[0], 'the child');
    const gate = await waitForStep(t, child.id, 'ok', 'pending');

    const status = await runCli(['status', id], { env: envFor(t) });
    expect([status.code, status.stderr]).toEqual([0, '']);
    expect(status.stdout).toMatch(new RegExp(`└─ sub \\(workflow\\)  #\\d+  waiting for sub-workflow ${child.id} \\(running\\)\\n\\s+↳ workflow ${child.id} "review": running\\n\\s+└─ ok \\(gate\\)  #${gate.id}  waiting for approval`));
    expect(status.stdout).toContain(`waiting: step ${gate.id} (ok) in sub-workflow ${child.id} (review) — approve: stepd approve ${gate.id}`);
    expect(status.stdout).not.toMatch(/sub \(workflow\).*stepd approve/);

    const json = JSON.parse((await runCli(['status', id, '--json'], { env: envFor(t) })).stdout);
    expect(json.waiting).toEqual([expect.objectContaining({ stepId: gate.id, name: 'ok', workflowId: child.id, workflowName: 'review', mayApprove: true })]);
    expect(json.steps[0]).toMatchObject({ name: 'sub', kind: 'workflow', status: 'pending', childId: child.id, child: { workflow: { id: child.id, name: 'review' } } });
    expect(json.steps[0].approve).toBeUndefined();

    const approve = await runCli(['approve', json.steps[0].id], { env: envFor(t) });
    expect(approve.code).toBe(1);
    expect(approve.stderr).toContain(`is not a gate: it waits for sub-workflow ${child.id}`);

    const list = await runCli(['list'], { env: envFor(t) });
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+running\\s+outer\\s.*1 gate\\(s\\) waiting`, 'm'));
    expect(list.stdout).toMatch(new RegExp(`^${child.id}\\s+running\\s+review\\s.*sub-workflow of ${id}; 1 gate\\(s\\) waiting`, 'm'));
    const listJson = JSON.parse((await runCli(['list', '--json'], { env: envFor(t) })).stdout) as { id: string; waiting: number; parentId: string | null }[];
    expect(listJson.find((w) => w.id === id)).toMatchObject({ waiting: 1, parentId: null });
    expect(listJson.find((w) => w.id === child.id)).toMatchObject({ waiting: 1, parentId: id });
  });
});
