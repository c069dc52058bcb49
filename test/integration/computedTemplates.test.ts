/**
 * Computed templates (`{{= CEL }}`) in args and in a wait, and allSettled covering a branch
 * whose transition fails, on the real database.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';

describe('{{= CEL }} templates at run time', () => {
  it('computes args values and a wait duration', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'count',
      steps: {
        count: { tool: 'core.echo', args: { hits: '{{input.hits}}' }, next: 'pause' },
        pause: { wait: '{{= size(steps.count.result.hits) * 10 }}', next: 'report' },
        report: {
          tool: 'core.echo',
          args: { next: '{{= input.page + 1 }}', total: '{{= steps.count.result.hits.map(h, h.n).exists(n, n > 2) }}', text: 'page {{= input.page + 1 }}' },
          done: true,
        },
      },
    }, { page: 1, hits: [{ n: 1 }, { n: 3 }] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ next: 2, total: true, text: 'page 2' });
    const pause = (await getSteps(t, id)).find((s) => s.name === 'pause')!;
    expect(new Date(pause.ready_at!).getTime() - new Date(pause.created_at).getTime()).toBeGreaterThanOrEqual(19);
  });
});

describe('allSettled and a failing transition inside a branch', () => {
  it('records the branch as failed and runs the join, instead of failing the workflow', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, {
      start: 'fork',
      steps: {
        fork: { parallel: ['ok', 'pick'], mode: 'allSettled', join: 'j' },
        ok: { tool: 'core.echo', args: { v: 1 } },
        pick: { tool: 'core.echo', args: { v: 2 }, branch: [{ if: 'result.v > 5', then: 'big' }] },
        big: { tool: 'core.noop' },
        j: { tool: 'core.echo', args: { r: '{{results}}' } },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const r = (wf.output as { r: Record<string, { status: string; error?: { code: string } }> }).r;
    expect(r.ok).toEqual({ status: 'done', result: { v: 1 } });
    expect(r.pick).toMatchObject({ status: 'failed', error: { code: 'no_branch_matched', step: 'pick' } });
  });
});
