/**
 * Worker tools with real processes: `stepd start` executors configured with `workers`, and Python
 * workers (psycopg2) serving billing.* through the SQL worker contract.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, waitFor, waitForWorkflow } from '../helpers/db.js';
import { doneLines, runChargeBatch, spawnWorkerExecutor, startPythonWorker, workerRole } from './workerHelpers.js';

const CONFIG = { workers: { billing: { timeout: '1m' } } };

const ORDER = {
  start: 'quote',
  steps: {
    quote: { tool: 'core.echo', args: { order: '{{input.order}}', amount: '{{input.amount}}' }, next: 'charge' },
    charge: { tool: 'billing.charge', args: '{{steps.quote.result}}', next: 'receipt' },
    receipt: { tool: 'core.echo', args: { receipt: '{{steps.charge.result.id}}', amount: '{{steps.charge.result.amount}}' }, done: true, output: '{{result}}' },
  },
};


describe('worker processes', () => {
  it('a workflow mixing executor tools and a worker tool completes with a Python worker and a stepd executor', async () => {
    const t = await createTestSchema();
    await spawnWorkerExecutor(t, 'e1', CONFIG);
    const { url } = await workerRole(t);
    const worker = await startPythonWorker(t, url, { listen: true });
    const id = await insertWorkflow(t, ORDER, { order: 'A-1', amount: 1200 });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ receipt: 'ch_A-1', amount: 1200 });
    expect(doneLines(worker.lines())).toHaveLength(1);
  });

  it('a worker killed mid-task: another takes the step after its lease, with the same idempotency key, and it is done once', async () => {
    const t = await createTestSchema();
    await spawnWorkerExecutor(t, 'e1', CONFIG);
    const { url } = await workerRole(t);
    const hung = await startPythonWorker(t, url, { mode: 'hang', lease: '2 seconds' });
    const id = await insertWorkflow(t, ORDER, { order: 'K-9', amount: 5 });
    const taken = await waitFor(() => hung.lines().find((l) => l.startsWith('taken ')), 'the first worker to take the task');
    await hung.kill('SIGKILL');
    const second = await startPythonWorker(t, url);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ receipt: 'ch_K-9', amount: 5 });
    const [firstStep, key] = taken.split(' ').slice(1, 3);
    const finished = doneLines(second.lines());
    expect(finished).toHaveLength(1);
    expect(finished[0]![1]).toBe(key);
    expect(finished[0]![0]).not.toBe(firstStep);
    const charges = (await getSteps(t, id)).filter((s) => s.name === 'charge');
    expect(charges.map((s) => [s.status, s.attempt, (s.error as { code?: string } | null)?.code ?? null])).toEqual([
      ['failed', 1, 'lost'],
      ['done', 2, null],
    ]);
  });

  it('3 workers x 2 executors run 2,000 worker steps (STEPD_TEST_WORKER_WORKFLOWS x 50): none lost, none done twice', async () => {
    const t = await createTestSchema();
    const WORKFLOWS = Number(process.env.STEPD_TEST_WORKER_WORKFLOWS ?? 40);
    const ITEMS = 50;
    await Promise.all([spawnWorkerExecutor(t, 'e1', CONFIG, 16), spawnWorkerExecutor(t, 'e2', CONFIG, 16)]);
    const { url } = await workerRole(t);
    const workers = await Promise.all([0, 1, 2].map((i) => startPythonWorker(t, url, { listen: i !== 2 })));
    await runChargeBatch(t, workers, WORKFLOWS, ITEMS, 240_000);
    // Every worker had a share.
    for (const w of workers) expect(doneLines(w.lines()).length).toBeGreaterThan(0);
  }, 300_000);
});
