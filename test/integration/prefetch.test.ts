/**
 * Prefetched steps (claimed beyond the free slots, waiting in the executor for one): never more
 * tool calls at once than the concurrency, each step run once; one that waited past half the
 * lease grace renews its lease and still runs; a stop hands the waiting ones back as ready
 * without spending an attempt.
 */
import { describe, expect, it } from 'vitest';
import { ProbeTools } from '../helpers/probe.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitFor, waitForWorkflow } from '../helpers/db.js';

const holdFlow = (ms?: number) => ({ start: 'h', steps: { h: { tool: 'probe.hold', args: ms === undefined ? {} : { ms } } } });

describe('prefetched steps', () => {
  it('wait for a slot: each runs once, never more tool calls at once than the concurrency', async () => {
    const t = await createTestSchema();
    const probe = new ProbeTools();
    await startExecutor(t, { tools: [probe], concurrency: 2 });
    const ids = await Promise.all(Array.from({ length: 8 }, () => insertWorkflow(t, holdFlow(30))));
    for (const id of ids) expect((await waitForWorkflow(t, id)).status).toBe('completed');
    expect(probe.calls).toBe(8);
    expect(probe.max).toBeLessThanOrEqual(2);
    const rows = (await Promise.all(ids.map((id) => getSteps(t, id)))).flat();
    expect(rows.every((r) => r.status === 'done' && r.attempt === 1)).toBe(true);
  });

  it('renew their lease when they waited past half the lease grace, and still run', async () => {
    const t = await createTestSchema();
    const probe = new ProbeTools();
    await startExecutor(t, { tools: [probe], concurrency: 1, leaseGraceMs: 200 });
    const first = await insertWorkflow(t, holdFlow(400));
    await waitFor(() => probe.inFlight === 1, 'the first step running');
    const second = await insertWorkflow(t, holdFlow(10));
    await waitFor(async () => (await getSteps(t, second))[0]?.status === 'running', 'the second step claimed (prefetched)');
    expect(probe.calls).toBe(1);
    expect((await waitForWorkflow(t, first)).status).toBe('completed');
    expect((await waitForWorkflow(t, second)).status).toBe('completed');
    const [row] = await getSteps(t, second);
    expect(row).toMatchObject({ status: 'done', attempt: 1 });
  });

  it('are handed back as ready by a stop, without spending an attempt', async () => {
    const t = await createTestSchema();
    const probe = new ProbeTools();
    probe.holdUntilReleased();
    const executor = await startExecutor(t, { tools: [probe], concurrency: 1 });
    const busy = await insertWorkflow(t, holdFlow());
    await waitFor(() => probe.inFlight === 1, 'the first step running');
    const waiting = await insertWorkflow(t, holdFlow());
    await waitFor(async () => (await getSteps(t, waiting))[0]?.status === 'running', 'the second step claimed (prefetched)');
    const stopped = executor.stop({ graceMs: 5_000 });
    // Handed back at once, while the running step still has its grace period.
    await waitFor(async () => (await getSteps(t, waiting))[0]?.status === 'ready', 'the prefetched step handed back');
    expect((await getSteps(t, waiting))[0]).toMatchObject({ attempt: 1, executor_id: null });
    probe.releaseAll();
    await stopped;
    expect((await getSteps(t, busy))[0]?.status).toBe('done');
    expect(probe.calls).toBe(1);
  });
});
