/**
 * Readied signal waits are never claimed: the outcome lane records each straight from `ready`, in
 * the transaction that starts its next step (src/executor/claims/signalPickup.ts), fenced by the
 * row's status so that executors racing for one record it once.
 */
import { describe, expect, it } from 'vitest';
import { claimReadySteps, claimReadyToollessSteps, peekReadiedSignalWaits, peekReadySteps } from '../../src/db/queries.js';
import { createLogger } from '../../src/logger.js';
import { PromMetrics } from '../../src/telemetry/promMetrics.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { listenFor } from '../helpers/listen.js';
import { killHard, spawnExecutor } from '../helpers/processes.js';
import { parsePromText } from '../telemetry/promText.js';

const PAID = {
  start: 'paid',
  steps: {
    paid: { signal: { name: 'payment', key: '{{input.order}}' }, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: '{{steps.paid.result.payload.amount}}' }, done: true, output: '{{result}}' },
  },
};

const send = (t: TestSchema, key: string, amount: number) =>
  t.q(`INSERT INTO stepd.signals (name, key, payload) VALUES ('payment', $1, $2)`, [key, JSON.stringify({ amount })]);

interface StepTimes {
  name: string;
  status: string;
  executor_id: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}

/** Prometheus metrics of one executor (no database gauges), and how many toolless step attempts it counts as done. */
function stepMetrics(): { metrics: PromMetrics; toollessDone: () => Promise<number>; inFlight: () => Promise<number> } {
  const metrics = new PromMetrics({ processMetrics: false });
  onCleanup(() => metrics.close());
  const value = async (name: string) => parsePromText(await metrics.render()).get(name) ?? 0;
  return { metrics, toollessDone: () => value('stepd_steps_finished_total{tool="none",outcome="done"}'), inFlight: () => value('stepd_steps_in_flight') };
}

const stepTimes = (t: TestSchema, workflowId: string) =>
  t.q<StepTimes>(`SELECT name, status, executor_id, created_at, started_at, completed_at FROM stepd.workflow_steps WHERE workflow_id = $1 ORDER BY id`, [workflowId]);

describe('readied signal waits', () => {
  it('are recorded with their next step in one transaction, announced as started then done', async () => {
    const t = await createTestSchema();
    const events = await listenFor(t, 'stepd_events');
    const executor = await startExecutor(t, { executorId: 'pickup-a' });
    const id = await insertWorkflow(t, PAID, { order: 'o-1' });
    const wait = await waitForStep(t, id, 'paid', 'pending');
    await send(t, 'o-1', 1200);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ shipped: 1200 });

    const [paid, ship] = await stepTimes(t, id);
    expect(paid).toMatchObject({ name: 'paid', status: 'done', executor_id: 'pickup-a' });
    // Never claimed: it started and ended in the transaction (one now()) that created its next step.
    expect(paid!.started_at!.getTime()).toBe(paid!.completed_at!.getTime());
    expect(ship!.created_at.getTime()).toBe(paid!.completed_at!.getTime());

    await waitFor(() => events.some((e) => e.type === 'workflow.completed' && e.workflowId === id), 'the workflow.completed event');
    const ofWait = events.filter((e) => e.stepId === wait.id).map((e) => e.type);
    expect(ofWait).toEqual(['step.waiting', 'step.started', 'step.done']);
    const started = events.find((e) => e.stepId === wait.id && e.type === 'step.started')!;
    expect(started).toMatchObject({ workflowId: id, step: 'paid', attempt: 1 });
    await executor.stop({ graceMs: 0 });
  });

  it('once recorded, are counted and logged as a toolless step that ran: started, ended done, a `step done` line', async () => {
    const t = await createTestSchema();
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } as never });
    const m = stepMetrics();
    const executor = await startExecutor(t, { log, metrics: m.metrics });
    // A flow whose only step is the wait: nothing else it runs is counted or logged as a step.
    const id = await insertWorkflow(t, { start: 'paid', steps: { paid: { signal: { name: 'payment', key: '{{input.order}}' }, done: true } } }, { order: 'o-m' });
    const wait = await waitForStep(t, id, 'paid', 'pending');
    expect(await m.toollessDone()).toBe(0);
    await send(t, 'o-m', 5);
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
    await waitFor(async () => (await m.toollessDone()) === 1, 'the recorded wait to be counted as a done toolless step');
    expect(await m.inFlight()).toBe(0);
    const done = lines.filter((l) => l.msg === 'step done');
    expect(done).toEqual([expect.objectContaining({ workflowId: id, stepId: wait.id, step: 'paid', attempt: 1, ms: 0 })]);
    await executor.stop({ graceMs: 0 });
    expect(await m.toollessDone()).toBe(1);
  });

  it('are taken by no claim statement, while ready gates and tool steps still are', async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const waiting = await insertWorkflow(t, PAID, { order: 'o-2' });
    const gated = await insertWorkflow(t, { start: 'g', steps: { g: { approval: true, next: 'e' }, e: { tool: 'core.echo', args: {}, done: true } } });
    const wait = await waitForStep(t, waiting, 'paid', 'pending');
    const gate = await waitForStep(t, gated, 'g', 'pending');
    await executor.stop({ graceMs: 0 });

    await send(t, 'o-2', 7);
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [gate.id]);
    expect((await getSteps(t, waiting)).find((s) => s.id === wait.id)?.status).toBe('ready');

    const db = await t.db.connect();
    onCleanup(async () => db.release());
    await db.query(`SET search_path TO ${t.schema.replace(/[^a-z0-9_]/g, '')}`);
    await db.query('BEGIN');
    await db.query(`SET LOCAL stepd.executor = 'on'`); // as the executor's sessions claim
    const by = { executorId: 'probe', leaseMs: 60_000, startedSchema: null };
    expect((await peekReadySteps(db, 10, true)).map((r) => r.id)).toEqual([gate.id]);
    expect((await claimReadyToollessSteps(db, { ...by, limit: 10 })).map((r) => r.id)).toEqual([gate.id]);
    expect(await claimReadySteps(db, { ...by, limit: 10 })).toEqual([]);
    expect((await peekReadiedSignalWaits(db, 10, [])).map((r) => r.id)).toEqual([wait.id]);
    expect(await peekReadiedSignalWaits(db, 10, [wait.id])).toEqual([]);
    await db.query('ROLLBACK');

    // An executor started now records the wait and runs the rest.
    await startExecutor(t);
    expect((await waitForWorkflow(t, waiting)).output).toEqual({ shipped: 7 });
    expect((await waitForWorkflow(t, gated)).status).toBe('completed');
  });

  it('two executors racing for one burst of readied waits record each once and advance each workflow once', async () => {
    const t = await createTestSchema();
    const [ma, mb] = [stepMetrics(), stepMetrics()];
    const a = await startExecutor(t, { executorId: 'pickup-a', metrics: ma.metrics });
    const count = 60;
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push(await insertWorkflow(t, PAID, { order: `o-${i}` }));
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'paid' AND status = 'pending'`);
      return r!.n === count;
    }, 'every wait to be pending');
    await startExecutor(t, { executorId: 'pickup-b', metrics: mb.metrics });
    // One statement readies every wait at once: both executors hear it and look.
    await t.q(
      `INSERT INTO stepd.signals (name, key, payload) SELECT 'payment', 'o-' || n, jsonb_build_object('amount', n) FROM generate_series(0, $1::int - 1) AS n`,
      [count],
    );
    for (const [i, id] of ids.entries()) expect((await waitForWorkflow(t, id)).output).toEqual({ shipped: i });
    const rows = await t.q<{ name: string; n: number; executors: string[] }>(
      `SELECT s.name, count(*)::int AS n, array_agg(DISTINCT s.executor_id) AS executors
         FROM stepd.workflow_steps s WHERE s.workflow_id = ANY($1::bigint[]) GROUP BY s.name ORDER BY s.name`,
      [ids],
    );
    expect(rows.map((r) => [r.name, r.n])).toEqual([
      ['paid', count],
      ['ship', count],
    ]);
    expect(rows.find((r) => r.name === 'paid')!.executors.every((e) => e === 'pickup-a' || e === 'pickup-b')).toBe(true);
    // Each wait counted once, by the executor that recorded it: never by one that lost the race too.
    const recordedBy = await t.q<{ executor_id: string; n: number }>(
      `SELECT executor_id, count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'paid' GROUP BY 1`,
    );
    const by = (e: string) => recordedBy.find((r) => r.executor_id === e)?.n ?? 0;
    await waitFor(async () => (await ma.toollessDone()) + (await mb.toollessDone()) === count, 'every recorded wait to be counted');
    expect([await ma.toollessDone(), await mb.toollessDone()]).toEqual([by('pickup-a'), by('pickup-b')]);
    await a.stop({ graceMs: 0 });
  });

  it("an executor SIGKILLed while it records a burst of readied waits loses none: the next records each once", async () => {
    const t = await createTestSchema();
    // Fast beats: the rescue of a `ship` it had running need not wait for the default dead-after.
    const a = await spawnExecutor(t, { executorId: 'pickup-killed', extraArgs: ['--heartbeat-interval', '100ms', '--dead-after', '1s'] });
    const count = 300;
    await t.q(`INSERT INTO stepd.workflows (name, flow, input) SELECT 'paid', $1::jsonb, jsonb_build_object('order', 'k-' || n) FROM generate_series(1, $2::int) AS n`, [
      JSON.stringify(PAID),
      count,
    ]);
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'paid' AND status = 'pending'`);
      return r!.n === count;
    }, 'every wait to be pending', 60_000);
    await t.q(`INSERT INTO stepd.signals (name, key, payload) SELECT 'payment', 'k-' || n, jsonb_build_object('amount', n) FROM generate_series(1, $1::int) AS n`, [count]);
    // Killed once it has recorded some: the rest are ready, on their way to its lane, or in a batch it has not committed.
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'paid' AND status = 'done'`);
      return r!.n > 0;
    }, 'the first waits to be recorded', 60_000);
    await killHard(t, a);
    await startExecutor(t, { executorId: 'pickup-next', heartbeatIntervalMs: 100, deadAfterMs: 1_000 });
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status = 'completed'`);
      return r!.n === count;
    }, 'every workflow to complete', 60_000);
    // Each wait recorded once (a ready row has no attempt to lose); a `ship` the killed executor
    // had running is rescued as `lost` and run again, once.
    const rows = await t.q<{ name: string; status: string; code: string | null; n: number; workflows: number }>(
      `SELECT name, status, error ->> 'code' AS code, count(*)::int AS n, count(DISTINCT workflow_id)::int AS workflows
         FROM stepd.workflow_steps GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    );
    expect(rows.filter((r) => r.name === 'paid')).toEqual([{ name: 'paid', status: 'done', code: null, n: count, workflows: count }]);
    expect(rows.find((r) => r.name === 'ship' && r.status === 'done')).toMatchObject({ n: count, workflows: count });
    expect(rows.filter((r) => !(r.status === 'done' || (r.name === 'ship' && r.status === 'failed' && r.code === 'lost')))).toEqual([]);
    const [shipped] = await t.q<{ n: number }>(
      `SELECT count(*)::int AS n FROM stepd.workflows WHERE output ->> 'shipped' = substr(input ->> 'order', 3)`,
    );
    expect(shipped!.n).toBe(count);
  });
});
