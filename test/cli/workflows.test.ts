/**
 * The CLI driving workflows end to end: the built CLI as child processes against the real
 * PostgreSQL (own schema per test), an executor running in-process.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, getWorkflow, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { EXAMPLES, envFor, jsonLines, runCli, spawnCli, writeJson } from './helpers.js';

const example = (name: string) => path.join(EXAMPLES, `${name}.json`);

describe('stepd run --follow', () => {
  it('shows each step with its duration and exits 0 when the workflow completes', async () => {
    const t = await createTestSchema();
    await startExecutor(t);

    const r = await runCli(['run', example('sequential'), '--follow'], { env: envFor(t) });

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^started workflow (\d+) \(sequential\) as \S+$/m);
    for (const step of ['search', 'summarize', 'notify']) {
      expect(r.stdout).toMatch(new RegExp(`${step} #\\d+ started`));
      expect(r.stdout).toMatch(new RegExp(`${step} #\\d+ done in \\d+(\\.\\d+)?m?s`));
    }
    expect(r.stdout).toMatch(/workflow \d+ completed in /);
    expect(r.stdout).toContain('output: {"message":"Research complete: 3 documents about AI safety"}');
  });

  it('exits 2 and prints the error when the workflow fails', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = await writeJson({
      start: 'boom',
      steps: { boom: { tool: 'core.fail', args: { message: 'nope', code: 'broken' }, retry: { maxAttempts: 1 } } },
    });

    const r = await runCli(['run', flow, '--follow', '--name', 'doomed'], { env: envFor(t) });

    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/boom #\d+ failed in \S+: \[broken\] nope/);
    expect(r.stdout).toMatch(/workflow \d+ failed/);
    const [row] = await t.q(`SELECT name, status, error FROM stepd.workflows`);
    expect(row).toMatchObject({ name: 'doomed', status: 'failed', error: { code: 'broken' } });
  });

  it('with --json prints the workflow id first, then one event per line, retries and all, ending with the workflow outcome', async () => {
    const t = await createTestSchema();
    await startExecutor(t);

    const r = await runCli(['run', example('retry'), '--follow', '--json'], { env: envFor(t) });

    expect(r.code).toBe(0);
    const [first, ...events] = jsonLines(r.stdout);
    expect(first).toEqual({ id: expect.stringMatching(/^\d+$/), name: 'retry', status: 'new', created: true });
    // One time format, whoever emitted the event (the executor or a trigger in the database).
    expect(events.every((e) => e.schema === t.schema && e.workflowId === first!.id && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(e.at))).toBe(true);
    expect(events[0]).toMatchObject({ type: 'workflow.started' });
    expect(events.at(-1)).toMatchObject({ type: 'workflow.completed', status: 'completed', output: expect.anything(), error: null, durationMs: expect.any(Number) });
    const flaky = events.filter((e) => e.step === 'flaky');
    expect(flaky.map((e) => [e.type, e.attempt])).toEqual([
      ['step.started', 1],
      ['step.failed', 1],
      ['step.retrying', 2],
      ['step.started', 2],
      ['step.failed', 2],
      ['step.retrying', 3],
      ['step.started', 3],
      ['step.failed', 3],
    ]);
    expect(flaky.find((e) => e.type === 'step.failed')).toMatchObject({ error: { code: 'unavailable' }, durationMs: expect.any(Number) });
    expect(events.find((e) => e.type === 'step.done' && e.step === 'fallback')).toMatchObject({ durationMs: expect.any(Number) });
  });

  it('runs a forEach over the --input items and reuses the workflow of an existing --key', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const args = ['run', example('foreach'), '--input', '{"items": ["a", "b", "c"]}', '--key', 'batch-1', '--user', 'james'];

    const first = await runCli([...args, '--follow'], { env: envFor(t) });
    const again = await runCli([...args, '--json'], { env: envFor(t) });

    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/summarize\[2\] #\d+ done/);
    expect(first.stdout).toContain('output: {"summaries":[{"index":0,"summary":"summary of a"},{"index":1,"summary":"summary of b"},{"index":2,"summary":"summary of c"}]}');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ created: false, status: 'completed' });
    expect(await t.q(`SELECT key, created_by FROM stepd.workflows`)).toEqual([{ key: 'batch-1', created_by: 'james' }]);
  });

  it('never misses the end when its event connection drops while it waits', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const follow = spawnCli(['run', example('approval'), '--follow'], { env: envFor(t) });
    const [, gateId] = await follow.waitFor(/waiting for approval → stepd approve (\d+)/);

    await t.q(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [`stepd-follow:${follow.child.pid}`]);
    await follow.waitFor(/lost the event connection/, 'stderr');
    expect((await runCli(['approve', gateId!], { env: envFor(t) })).code).toBe(0);

    const r = await follow.exited;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/workflow \d+ completed/);
  });
});

describe('stepd approve', () => {
  it('approves a waiting gate through the SQL contract and the followed workflow completes', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const follow = spawnCli(['run', example('approval'), '--follow'], { env: envFor(t) });
    const [, gateId] = await follow.waitFor(/request_approval #\d+ waiting for approval → stepd approve (\d+)/);

    const r = await runCli(['approve', gateId!, '--by', 'james', '--data', '{"approved": true, "budget": 500}'], { env: envFor(t) });

    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^approved step ${gateId} \\(request_approval\\) of workflow \\d+ as james$`, 'm'));
    const done = await follow.exited;
    expect(done.code).toBe(0);
    expect(done.stdout).toContain('"approval":{"budget":500,"approved":true}');
    const [gate] = await t.q(`SELECT status, result, readied_by FROM stepd.workflow_steps WHERE id = $1`, [gateId]);
    expect(gate).toEqual({ status: 'done', result: { approved: true, budget: 500 }, readied_by: 'james' });
  });

  it('rejects with a reason: the gate fails with code rejected and watch exits 2; a second approve is refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const started = await runCli(['run', example('approval'), '--json'], { env: envFor(t) });
    const { id } = JSON.parse(started.stdout) as { id: string };
    const gate = await waitForStep(t, id, 'request_approval', 'pending');

    const rejected = await runCli(['approve', gate.id, '--reject', '--reason', 'too costly', '--json'], { env: envFor(t) });
    const watched = await runCli(['watch', id], { env: envFor(t) });
    const again = await runCli(['approve', gate.id], { env: envFor(t) });

    expect(rejected.code).toBe(0);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ stepId: gate.id, workflowId: id, status: 'ready', result: { approved: false, reason: 'too costly' } });
    expect(watched.code).toBe(2);
    expect(watched.stdout).toContain('[rejected] rejected: too costly');
    expect((await getWorkflow(t, id)).error).toMatchObject({ code: 'rejected', step: 'request_approval' });
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`stepd: step ${gate.id} (request_approval, workflow ${id}) is failed; only a pending step can be approved\n`);
  });

  it('refuses a step that is not pending, saying what state it is in', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const r = await runCli(['run', example('sequential'), '--follow', '--json'], { env: envFor(t) });
    const done = jsonLines(r.stdout).find((e) => e.type === 'step.done')!;

    const refused = await runCli(['approve', done.stepId], { env: envFor(t) });

    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`stepd: step ${done.stepId} (search, workflow ${done.workflowId}) is done; only a pending step can be approved\n`);
  });
});

describe('stepd cancel', () => {
  it('cancels a running workflow: its running step is cancelled and the follower exits 3; cancelling again is refused', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const flow = await writeJson({ start: 'wait', steps: { wait: { tool: 'core.sleep', args: { ms: 60_000 }, timeout: '2m', done: true } } });
    const follow = spawnCli(['run', flow, '--follow'], { env: envFor(t) });
    const [, id] = await follow.waitFor(/^started workflow (\d+)/m);
    await follow.waitFor(/wait #\d+ started/);

    const r = await runCli(['cancel', id!], { env: envFor(t) });

    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`cancelled workflow ${id} (flow)\n`);
    const followed = await follow.exited;
    expect(followed.code).toBe(3);
    expect(followed.stdout).toMatch(new RegExp(`workflow ${id} cancelled`));
    expect((await getSteps(t, id!)).map((s) => s.status)).toEqual(['cancelled']);
    const again = await runCli(['cancel', id!], { env: envFor(t) });
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`stepd: workflow ${id} (flow) is already cancelled; only a new or running workflow can be cancelled\n`);
  });
});

describe('stepd status and list', () => {
  it('status --json gives the workflow, every step row with its fan-out position, and the waiting gates', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const run = await runCli(['run', example('parallel'), '--follow', '--json'], { env: envFor(t) });
    const id = jsonLines(run.stdout)[0]!.id as string;

    const r = await runCli(['status', id, '--json'], { env: envFor(t) });

    expect(r.code).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(Object.keys(view)).toEqual(['workflow', 'steps', 'waiting', 'signals']);
    expect(view.workflow).toMatchObject({
      id,
      name: 'parallel',
      status: 'completed',
      input: {},
      output: { web: { source: 'web', waited: 500 }, kb: { source: 'kb', hits: ['doc-1', 'doc-2'] } },
      error: null,
      durationMs: expect.any(Number),
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const byName = Object.fromEntries(view.steps.map((s: any) => [s.name, s]));
    expect(byName.enrich).toMatchObject({ kind: 'fork', status: 'done', fanoutId: null, result: { branches: ['by_web', 'by_kb'] } });
    expect(byName.by_web).toMatchObject({ kind: 'tool', tool: 'core.sleep', fanoutId: byName.enrich.id, itemIndex: 0, attempt: 1, durationMs: expect.any(Number) });
    expect(byName.web_result).toMatchObject({ fanoutId: byName.enrich.id, itemIndex: 0 });
    expect(byName.by_kb).toMatchObject({ fanoutId: byName.enrich.id, itemIndex: 1 });
    expect(byName.merge).toMatchObject({ fanoutId: null, status: 'done' });
    expect(view.waiting).toEqual([]);
    expect(view.signals).toEqual([]);

    const text = await runCli(['status', id], { env: envFor(t) });
    expect(text.stdout).toMatch(/├─ enrich \(fork\)  #\d+  done: fanned out to 2 branch\(es\)\n│  ├─ \[branch 0: by_web\]\n│  │  ├─ by_web \(core\.sleep\)  #\d+  done \S+\n│  │  └─ web_result/);
  });

  it('status shows which gate is waiting with the approve command; list shows the workflow with its waiting gate', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const { id } = JSON.parse((await runCli(['run', example('approval'), '--json'], { env: envFor(t) })).stdout) as { id: string };
    const gate = await waitForStep(t, id, 'request_approval', 'pending');

    const status = await runCli(['status', id], { env: envFor(t) });
    const statusJson = JSON.parse((await runCli(['status', id, '--json'], { env: envFor(t) })).stdout);
    const list = await runCli(['list', '--status', 'running'], { env: envFor(t) });
    const listJson = JSON.parse((await runCli(['list', '--json'], { env: envFor(t) })).stdout);

    expect([status.code, status.stderr]).toEqual([0, '']);
    expect(status.stdout).toMatch(new RegExp(`└─ request_approval \\(gate\\)  #${gate.id}  waiting for approval \\(\\S+\\) → stepd approve ${gate.id}`));
    expect(status.stdout).toContain(`waiting: step ${gate.id} (request_approval)`);
    expect(statusJson.waiting).toEqual([expect.objectContaining({ stepId: gate.id, name: 'request_approval', approve: `stepd approve ${gate.id}` })]);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+running\\s+approval\\s.*1 gate\\(s\\) waiting`, 'm'));
    expect(listJson).toEqual([expect.objectContaining({ id, name: 'approval', status: 'running', waiting: 1 })]);
  });
});

describe('stepd watch', () => {
  it('streams the events of every workflow of the schema as JSON lines', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const watch = spawnCli(['watch', '--json'], { env: envFor(t) });
    await watch.waitFor(/watching schema/, 'stderr');

    const { id } = JSON.parse((await runCli(['run', example('sequential'), '--json'], { env: envFor(t) })).stdout) as { id: string };
    await watch.waitFor(new RegExp(`"type":"workflow.completed","schema":"${t.schema}","workflowId":"${id}"`));

    const events = jsonLines(watch.stdout);
    expect(events.map((e) => e.type)).toEqual([
      'workflow.started',
      'step.started',
      'step.done',
      'step.started',
      'step.done',
      'step.started',
      'step.done',
      'workflow.completed',
    ]);
    expect(events.filter((e) => e.type === 'step.done').map((e) => e.step)).toEqual(['search', 'summarize', 'notify']);
    expect((await watch.kill('SIGINT')).code).toBe(0);
  });

  it('reports a workflow cancelled from plain SQL (the database emits workflow.cancelled)', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const { id } = JSON.parse((await runCli(['run', example('approval'), '--json'], { env: envFor(t) })).stdout) as { id: string };
    await waitForStep(t, id, 'request_approval', 'pending');
    const watch = spawnCli(['watch', id, '--json'], { env: envFor(t) });
    await waitFor(async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [`stepd-follow:${watch.child.pid}`])).length > 0, 'watch to LISTEN');

    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);

    const r = await watch.exited;
    expect(r.code).toBe(3);
    expect(jsonLines(r.stdout).at(-1)).toMatchObject({ type: 'workflow.cancelled', workflowId: id, schema: t.schema });
    expect((await waitForWorkflow(t, id)).status).toBe('cancelled');
  });
});
