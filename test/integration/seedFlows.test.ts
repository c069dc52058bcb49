import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForStep, waitForWorkflow } from '../helpers/db.js';

describe("the seed's example flows in their flat form", () => {
  it('runs a sequential flow to completed, each step once, templates resolved from input', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: { name: 'search', tool: 'core.echo', args: { query: '{{input.topic}}' }, next: 'summarize' },
      summarize: { name: 'summarize', tool: 'core.echo', args: { id: '{{input.doc_id}}' }, next: 'notify' },
      notify: { name: 'notify', tool: 'core.echo', args: { message: 'Research complete' }, done: true },
    };
    const id = await insertWorkflow(t, flow, { topic: 'AI safety', doc_id: 42 }, { user: 'james' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ message: 'Research complete' });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.status, s.args])).toEqual([
      ['search', 'done', { query: 'AI safety' }],
      ['summarize', 'done', { id: 42 }],
      ['notify', 'done', { message: 'Research complete' }],
    ]);
  });

  it('follows the branch whose seed condition matches (result == true / result == false)', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = (isAdmin: unknown) => ({
      start: {
        name: 'check_admin',
        tool: 'core.echo',
        args: { admin: isAdmin },
        branch: [
          { if: 'result == true', then: 'admin_action' },
          { if: 'result == false', then: 'user_action' },
        ],
      },
      admin_action: { tool: 'core.echo', args: { who: 'admin' }, done: true },
      user_action: { tool: 'core.echo', args: { who: 'user' }, done: true },
    });
    // The seed's tool returned a bare boolean; core.echo returns its args, so echo a bare value through a step.
    const bare = (v: unknown) => ({
      start: { name: 'check_admin', tool: 'core.echo', args: '{{input.admin}}' as unknown, branch: flow(v).start.branch },
      admin_action: flow(v).admin_action,
      user_action: flow(v).user_action,
    });
    const a = await insertWorkflow(t, bare(true), { admin: true });
    const b = await insertWorkflow(t, bare(false), { admin: 'false' });
    expect((await waitForWorkflow(t, a)).output).toEqual({ who: 'admin' });
    expect((await waitForWorkflow(t, b)).output).toEqual({ who: 'user' });
  });

  it('holds an approval gate pending until another service readies it, then continues', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = {
      start: { name: 'request_approval', tool: null, args: {}, next: 'execute_write' },
      execute_write: { name: 'execute_write', tool: 'core.echo', args: { title: '{{input.title}}', body: '{{input.body}}' }, done: true },
    };
    const id = await insertWorkflow(t, flow, { title: 'T', body: 'B' });
    const gate = await waitForStep(t, id, 'request_approval', 'pending');
    expect((await waitForWorkflow(t, id, ['running'])).status).toBe('running');
    const updated = await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending' RETURNING readied_by, readied_at`, [gate.id]);
    expect(updated[0].readied_by).toBe('postgres');
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ title: 'T', body: 'B' });
    const steps = await getSteps(t, id);
    expect(steps[0]).toMatchObject({ name: 'request_approval', status: 'done', result: { approved: true } });
  });
});
