/**
 * A worker process outlives a PostgreSQL restart (a private cluster, never the shared server):
 * its takes fail and back off, its listener reconnects, the outcome of a task that finished while
 * the server was away is reported once it is back, and new tasks are served again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';
import { insertWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';
import { createClusterSchema, startPrivateCluster, type PrivateCluster } from '../helpers/privateCluster.js';
import { spawnWorker } from './helpers.js';

describe('a worker across a database restart', () => {
  let cluster: PrivateCluster;
  beforeAll(async () => {
    cluster = await startPrivateCluster();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  it('reconnects with back-off, reports what finished meanwhile, and serves new tasks', async () => {
    const t = await createClusterSchema(cluster);
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    // The cluster's own superuser: the role is not what this test is about.
    const worker = await spawnWorker(t, cluster.url, { WORKER_TOOL_MS: '1500' });
    expect(worker.events[0]!.listening).toBe(true);
    const flow = { start: 'c', steps: { c: { tool: 'billing.charge', args: { amount: '{{input.n}}' }, done: true, output: '{{result}}' } } };
    const before = await insertWorkflow(t, flow, { n: 1 });
    await worker.waitForEvent((e) => e.event === 'start', 'the first task to start');
    await cluster.restart('fast');
    const after = await insertWorkflow(t, flow, { n: 2 });
    for (const [id, n] of [[before, 1], [after, 2]] as const) {
      const wf = await waitForWorkflow(t, id, undefined, 60_000);
      expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
      expect(wf.output).toMatchObject({ id: `ch_${n}` });
    }
    expect(worker.child.exitCode).toBeNull();
    expect(worker.output()).toMatch(/lost the LISTEN connection/);
    const starts = worker.events.filter((e) => e.event === 'start');
    // The first task either reported after the restart or was retaken once its lease ran out; never both.
    expect(new Set(starts.map((e) => e.stepId)).size).toBe(starts.length);
  });
});
