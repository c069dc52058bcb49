import { describe, expect, it } from 'vitest';
import { createTestSchema, getWorkflow, insertWorkflow, startExecutor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';

const echoFlow = (tag: string) => ({ start: 'say', steps: { say: { tool: 'core.echo', args: { tag, topic: '{{input.topic}}' }, done: true, output: '{{result}}' } } });

/** Stores a version the way `stepd flow put` does (the database numbers it). */
async function putFlow(t: TestSchema, name: string, flow: unknown): Promise<number> {
  const rows = await t.q<{ version: number }>(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2) RETURNING version`, [name, JSON.stringify(flow)]);
  return rows[0]!.version;
}

/** Starts a workflow by name, as plain SQL: flow left NULL. */
async function startByName(t: TestSchema, name: string, input: unknown = {}, version?: number): Promise<string> {
  const rows = await t.q<{ id: string }>(
    `INSERT INTO stepd.workflows (name, input, flow_version) VALUES ($1, $2, $3) RETURNING id`,
    [name, JSON.stringify(input), version ?? null],
  );
  return rows[0]!.id;
}

describe('starting a registered flow by name', () => {
  it('fails a by-name row with an unknown name with unknown_flow while the valid rows of the same batch run', async () => {
    const t = await createTestSchema();
    await putFlow(t, 'greet', echoFlow('v1'));
    // All inserted before the executor starts, so they are admitted in one batch.
    const before = await insertWorkflow(t, echoFlow('inline'), { topic: 'a' });
    const byName = await startByName(t, 'greet', { topic: 'b' });
    const unknown = await startByName(t, 'no-such-flow', { topic: 'c' });
    const badVersion = await startByName(t, 'greet', { topic: 'd' }, 7);
    const after = await insertWorkflow(t, echoFlow('inline'), { topic: 'e' });
    await startExecutor(t);

    for (const id of [before, byName, after]) expect((await waitForWorkflow(t, id)).status).toBe('completed');
    expect((await getWorkflow(t, byName)).output).toEqual({ tag: 'v1', topic: 'b' });
    const u = await waitForWorkflow(t, unknown);
    expect(u.status).toBe('failed');
    expect(u.error).toMatchObject({ code: 'unknown_flow' });
    expect(u.error!.message).toContain('no-such-flow');
    expect(u.flow).toBeNull();
    const v = await waitForWorkflow(t, badVersion);
    expect(v.status).toBe('failed');
    expect(v.error).toMatchObject({ code: 'unknown_flow' });
    expect(v.error!.message).toMatch(/version 7/);
  });

  it('pins the latest version at admission: a later put never changes the running workflow', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const gated = (tag: string) => ({
      start: 'wait',
      steps: { wait: { approval: true, next: 'say' }, say: { tool: 'core.echo', args: { tag }, done: true, output: '{{result.tag}}' } },
    });
    expect(await putFlow(t, 'pinned', gated('v1'))).toBe(1);
    const id = await startByName(t, 'pinned');
    const gate = await waitForStep(t, id, 'wait', 'pending');
    const admitted = await getWorkflow(t, id);
    expect(admitted.flow_version).toBe(1);
    expect(admitted.flow).toEqual(gated('v1'));
    expect(await putFlow(t, 'pinned', gated('v2'))).toBe(2);
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: 'v1', flow_version: 1 });
    // A new start takes the new latest version; an explicit one is honoured.
    const latest = await startByName(t, 'pinned');
    const older = await startByName(t, 'pinned', {}, 1);
    await waitForStep(t, latest, 'wait', 'pending');
    await waitForStep(t, older, 'wait', 'pending');
    expect((await getWorkflow(t, latest)).flow_version).toBe(2);
    expect((await getWorkflow(t, older)).flow).toEqual(gated('v1'));
  });

  it('validates a registered flow again at admission: an invalid stored version fails with invalid_flow', async () => {
    const t = await createTestSchema();
    await putFlow(t, 'broken', { start: 'a', steps: { a: { tool: 'core.echo', next: 'missing' } } });
    const id = await startByName(t, 'broken');
    await startExecutor(t);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'invalid_flow', issues: [{ path: 'steps.a.next' }] });
    expect(wf.flow_version).toBe(1);
  });
});
