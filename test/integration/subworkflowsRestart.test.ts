import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, startExecutor, waitFor, waitForStep, waitForWorkflow, insertWorkflow, type TestSchema } from '../helpers/db.js';
import type { WorkflowRow } from '../../src/db/tables.js';

async function registerFlow(t: TestSchema, name: string, flow: unknown): Promise<void> {
  await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2)`, [name, JSON.stringify(flow)]);
}

async function childrenOf(t: TestSchema, parentId: string): Promise<WorkflowRow[]> {
  return t.q<WorkflowRow>(`SELECT * FROM stepd.workflows WHERE parent_id = $1 ORDER BY id`, [parentId]);
}

const PARENT = {
  start: 'sub',
  steps: {
    sub: { workflow: { name: 'child', input: { n: '{{input.n}}' } }, next: 'after' },
    after: { tool: 'core.echo', args: { child: '{{steps.sub.result}}' } },
  },
};

/**
 * Stops every executor, then finishes the child as an executor would (marker on, as the tables'
 * owner) and claims the parent's readied step under `executorId`, as an executor that is killed
 * right after its claim commits would have left it.
 */
async function leaveSettlingStepClaimedBy(t: TestSchema, parentId: string, executorId: string): Promise<string> {
  const [child] = await childrenOf(t, parentId);
  const asExecutor = async (statements: [string, unknown[]][]) => {
    const client = await t.db.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL search_path = ${t.schema}`);
      await client.query(`SET LOCAL stepd.executor = 'on'`);
      for (const [text, values] of statements) await client.query(text, values);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  await asExecutor([
    [`UPDATE workflow_steps SET status = 'cancelled', completed_at = now() WHERE workflow_id = $1 AND status = 'pending'`, [child!.id]],
    [`UPDATE workflows SET status = 'completed', output = '{"n": 7}', completed_at = now() WHERE id = $1`, [child!.id]],
  ]);
  const [sub] = await getSteps(t, parentId);
  expect(sub).toMatchObject({ status: 'ready', result: { workflowId: child!.id, status: 'completed', output: { n: 7 } } });
  await asExecutor([
    [
      `UPDATE workflow_steps SET status = 'running', executor_id = $2, started_at = now(), lease_until = now() + interval '1 hour'
        WHERE id = $1 AND status = 'ready'`,
      [sub!.id, executorId],
    ],
  ]);
  expect((await getSteps(t, parentId))[0]).toMatchObject({ status: 'running', executor_id: executorId });
  return sub!.id;
}

describe('sub-workflows across executor restarts', () => {
  it('a parent waiting for a child survives a restart of the executor while the child runs', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'child', {
      start: 'slow',
      steps: { slow: { tool: 'core.sleep', args: { ms: 300 }, next: 'say' }, say: { tool: 'core.echo', args: { n: '{{input.n}}' }, done: true, output: '{{result}}' } },
    });
    const first = await startExecutor(t);
    const id = await insertWorkflow(t, PARENT, { n: 3 });
    const child = await waitFor(async () => (await childrenOf(t, id))[0], 'the child');
    await waitForStep(t, child.id, 'slow', 'running');
    await first.stop({ graceMs: 0 });
    await startExecutor(t);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ child: { n: 3 } });
    expect(await childrenOf(t, id)).toHaveLength(1);
    expect((await getSteps(t, id)).map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['sub', 'done', 1],
      ['after', 'done', 1],
    ]);
  });

  const GATED_CHILD = { start: 'ok', steps: { ok: { approval: true, next: 'say' }, say: { tool: 'core.echo', args: { n: '{{input.n}}' } } } };

  it('an executor killed while settling a finished child: at its restart the step settles from the child, once, without a new child', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'child', GATED_CHILD);
    const first = await startExecutor(t);
    const id = await insertWorkflow(t, PARENT, { n: 3 });
    const child = await waitFor(async () => (await childrenOf(t, id))[0], 'the child');
    await waitForStep(t, child.id, 'ok', 'pending');
    await first.stop({ graceMs: 0 });
    const subId = await leaveSettlingStepClaimedBy(t, id, 'killed-exec');

    await startExecutor(t, { executorId: 'killed-exec' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ child: { n: 7 } });
    expect(await childrenOf(t, id)).toHaveLength(1);
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.id, s.status, s.attempt])).toEqual([
      [subId, 'done', 1],
      [steps[1]!.id, 'done', 1],
    ]);
  });

  it('a settling step of an executor that stopped heartbeating is handed back by the watchdog, not failed as lost', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'child', GATED_CHILD);
    const first = await startExecutor(t);
    const id = await insertWorkflow(t, PARENT, { n: 3 });
    const child = await waitFor(async () => (await childrenOf(t, id))[0], 'the child');
    await waitForStep(t, child.id, 'ok', 'pending');
    await first.stop({ graceMs: 0 });
    await t.q(
      `INSERT INTO stepd.executors (id, started_at, last_beat_at, host, pid, heartbeat_interval_ms, dead_after_ms)
       VALUES ('gone', now() - interval '1 hour', now() - interval '1 hour', 'elsewhere', 1, 100, 1000)`,
    );
    await leaveSettlingStepClaimedBy(t, id, 'gone');

    await startExecutor(t);
    const wf = await waitForWorkflow(t, id);
    expect(wf.output).toEqual({ child: { n: 7 } });
    expect((await getSteps(t, id)).map((s) => [s.name, s.status, s.attempt])).toEqual([
      ['sub', 'done', 1],
      ['after', 'done', 1],
    ]);
    expect(await childrenOf(t, id)).toHaveLength(1);
  });

  it('two executors: each child settles its parent step exactly once', async () => {
    const t = await createTestSchema();
    await registerFlow(t, 'child', { start: 'say', steps: { say: { tool: 'core.echo', args: { n: '{{input.n}}' }, done: true, output: '{{result.n}}' } } });
    await startExecutor(t);
    await startExecutor(t);
    const id = await insertWorkflow(
      t,
      {
        start: 'each',
        steps: {
          each: { forEach: { items: '{{input.items}}', step: 'one' }, join: 'all' },
          one: { workflow: { name: 'child', input: { n: '{{item}}' } } },
          all: { tool: 'core.echo', args: { ns: '{{results}}' } },
        },
      },
      { items: Array.from({ length: 20 }, (_, i) => i) },
    );
    const wf = await waitForWorkflow(t, id);
    expect(wf.output).toEqual({ ns: Array.from({ length: 20 }, (_, i) => i) });
    expect(await childrenOf(t, id)).toHaveLength(20);
    const ones = (await getSteps(t, id)).filter((s) => s.name === 'one');
    expect(ones).toHaveLength(20);
    expect(ones.every((s) => s.status === 'done' && s.attempt === 1)).toBe(true);
  });
});
