/**
 * The worker path's wake-ups (sql/0034): a report NOTIFYs the executors only when no other
 * report is on its way to them, and every report is still recorded (the executor looks again
 * after claiming reports: src/executor/reportLookout.ts).
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { connectAs } from './workerHelpers.js';
import { WorkerToolProvider } from '../../src/workers/workerTools.js';

const CHARGE = { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true, output: '{{result}}' } } };

const workerPool = (t: TestSchema) => connectAs(t, `${t.schema}_worker`);

describe('worker report wake-ups', () => {
  it('a report made while another waits sends no NOTIFY of its own, and both are recorded', async () => {
    const t = await createTestSchema();
    const first = await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })] });
    const a = await insertWorkflow(t, CHARGE);
    const b = await insertWorkflow(t, CHARGE);
    await waitFor(
      async () => (await t.q(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE workflow_id IN ($1, $2) AND status = 'pending'`, [a, b]))[0].n === 2,
      'both steps handed to the workers',
    );
    // No executor from here: the reports wait, ready, for the next one.
    await first.stop({ graceMs: 0 });
    const w = await workerPool(t);
    const tasks = await w.q<{ step_id: string; token: string; workflow_id: string }>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 10, interval '30 seconds')`);
    expect(tasks).toHaveLength(2);
    const listener = await t.db.connect();
    const heard: { channel: string; payload: string }[] = [];
    listener.on('notification', (n) => heard.push({ channel: n.channel, payload: n.payload ?? '' }));
    const marker = `stepd_test_marker_${t.schema}`;
    await listener.query(`LISTEN stepd_wakeup; LISTEN ${marker}`);
    try {
      for (const task of tasks) await w.q(`SELECT stepd.finish_task($1, $2, '{"paid": true}')`, [task.step_id, task.token]);
      // Notifications arrive in commit order: once the marker is here, the reports' are too.
      await t.q(`SELECT pg_notify($1, 'done')`, [marker]);
      await waitFor(() => heard.some((h) => h.channel === marker), 'the marker');
      const wakeups = heard.filter((h) => h.channel === 'stepd_wakeup').map((h) => JSON.parse(h.payload));
      expect(wakeups.filter((p) => p.schema === t.schema && p.table === 'workflow_steps')).toEqual([{ schema: t.schema, table: 'workflow_steps', status: 'ready' }]);
    } finally {
      listener.release(true);
    }
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })], pollIntervalMs: 60_000 });
    expect(await waitForWorkflow(t, a)).toMatchObject({ status: 'completed', output: { paid: true } });
    expect(await waitForWorkflow(t, b)).toMatchObject({ status: 'completed', output: { paid: true } });
  });

  it('reports that skip their NOTIFY are recorded without waiting for the poll', async () => {
    const t = await createTestSchema();
    // A poll far away: only wake-ups and the executor's look after a claim of reports record them.
    await startExecutor(t, { tools: [new WorkerToolProvider({ prefix: 'billing' })], pollIntervalMs: 60_000 });
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await insertWorkflow(t, CHARGE));
    const w = await workerPool(t);
    const tasks: { step_id: string; token: string }[] = [];
    await waitFor(async () => {
      tasks.push(...(await w.q<{ step_id: string; token: string }>(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 20, interval '30 seconds')`)));
      return tasks.length === 20;
    }, 'all 20 tasks taken');
    // Reported one after another, each while the previous ones are on their way to the executor.
    for (const task of tasks) await w.q(`SELECT stepd.finish_task($1, $2, '{"paid": true}')`, [task.step_id, task.token]);
    for (const id of ids) expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed' });
  });
});
