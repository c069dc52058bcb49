/**
 * Worker tools with real processes: `stepd start` executors configured with `workers`, and Python
 * workers (psycopg2) serving billing.* through the SQL worker contract.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, waitFor, waitForWorkflow } from '../helpers/db.js';
import { spawnWorkerExecutor, startPythonWorker, workerRole } from './workerHelpers.js';

const CONFIG = { workers: { billing: { timeout: '1m' } } };

const ORDER = {
  start: 'quote',
  steps: {
    quote: { tool: 'core.echo', args: { order: '{{input.order}}', amount: '{{input.amount}}' }, next: 'charge' },
    charge: { tool: 'billing.charge', args: '{{steps.quote.result}}', next: 'receipt' },
    receipt: { tool: 'core.echo', args: { receipt: '{{steps.charge.result.id}}', amount: '{{steps.charge.result.amount}}' }, done: true, output: '{{result}}' },
  },
};

/** Lines `done <step_id> <key>` of the workers, as [step_id, key]. */
function done(lines: string[]): [string, string][] {
  return lines.filter((l) => l.startsWith('done ')).map((l) => l.split(' ').slice(1, 3) as [string, string]);
}

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
    expect(done(worker.lines())).toHaveLength(1);
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
    const finished = done(second.lines());
    expect(finished).toHaveLength(1);
    expect(finished[0]![1]).toBe(key);
    expect(finished[0]![0]).not.toBe(firstStep);
    const charges = (await getSteps(t, id)).filter((s) => s.name === 'charge');
    expect(charges.map((s) => [s.status, s.attempt, (s.error as { code?: string } | null)?.code ?? null])).toEqual([
      ['failed', 1, 'lost'],
      ['done', 2, null],
    ]);
  });

  it('3 workers x 2 executors run many worker steps: none lost, none done twice', async () => {
    const t = await createTestSchema();
    const WORKFLOWS = Number(process.env.STEPD_TEST_WORKER_WORKFLOWS ?? 40);
    const ITEMS = 50;
    await Promise.all([spawnWorkerExecutor(t, 'e1', CONFIG, 16), spawnWorkerExecutor(t, 'e2', CONFIG, 16)]);
    const { url } = await workerRole(t);
    const workers = await Promise.all([0, 1, 2].map((i) => startPythonWorker(t, url, { listen: i !== 2 })));
    const flow = {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.orders}}', step: 'charge' }, join: 'sum' },
        charge: { tool: 'billing.charge', args: { order: '{{item}}', amount: 1 } },
        sum: { tool: 'core.echo', args: { results: '{{results}}' }, done: true, output: '{{result.results}}' },
      },
    };
    const ids: string[] = [];
    for (let w = 0; w < WORKFLOWS; w++) {
      ids.push(await insertWorkflow(t, flow, { orders: Array.from({ length: ITEMS }, (_, i) => `${w}-${i}`) }));
    }
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status IN ('new', 'running')`);
      return r!.n === 0;
    }, 'every workflow to end', 240_000);
    if (process.env.STEPD_TEST_WORKER_STATS) {
      console.log(await t.q(`SELECT min(created_at) AS first_created, max(created_at) AS last_created, max(task_taken_at) AS last_taken, max(completed_at) AS last_done,
          avg(task_taken_at - created_at) AS wait_take, avg(updated_at - task_taken_at) AS take_to_report, avg(completed_at - updated_at) AS report_to_done
          FROM stepd.workflow_steps WHERE name = 'charge'`));
      console.log(await t.q(`SELECT min(created_at), max(completed_at) FROM stepd.workflows`));
      for (const w of workers) {
        const ls = w.lines().filter((l) => l.startsWith('taken') || l.startsWith('done'));
        console.log(ls.slice(0, 3).join('\n'), '...', ls.slice(-3).join('\n'), ls.length);
      }
    }
    const ended = await t.q<{ status: string; output: unknown; error: unknown }>(`SELECT status, output, error FROM stepd.workflows ORDER BY id`);
    expect(ended.every((w) => w.status === 'completed' && Array.isArray(w.output) && w.output.length === ITEMS), JSON.stringify(ended.filter((w) => w.status !== "completed").slice(0, 3))).toBe(true);
    const reports = workers.flatMap((w) => done(w.lines()));
    expect(reports).toHaveLength(WORKFLOWS * ITEMS);
    expect(new Set(reports.map((r) => r[1])).size).toBe(WORKFLOWS * ITEMS);
    const [rows] = await t.q<{ done: number; other: number }>(
      `SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status <> 'done')::int AS other
         FROM stepd.workflow_steps WHERE name = 'charge'`,
    );
    expect(rows).toEqual({ done: WORKFLOWS * ITEMS, other: 0 });
    // Every worker had a share.
    for (const w of workers) expect(done(w.lines()).length).toBeGreaterThan(0);
  }, 300_000);
});
