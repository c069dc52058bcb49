/**
 * Events are hints. Any role (one granted nothing at all, or a client) may NOTIFY well-formed
 * lifecycle events on `stepd_events` for a live workflow: the review made `stepd watch` and
 * `stepd run --follow` print fake gates and exit with a wrong outcome that way. Now both read the
 * rows before printing an end, a gate, a cancel or a step's result, and print what the rows say:
 * the forged events show nothing and end nothing, and the real end still ends them, with its
 * real outcome. Run as real processes of the built CLI (dist/src/cli.js).
 */
import { describe, expect, it } from 'vitest';
import { envFor, jsonLines, spawnCli, writeJson, type CliProcess } from '../cli/helpers.js';
import { holdTools } from '../helpers/holdTools.js';
import { createUngrantedRole, forgerOn, type Forger } from './forgers.js';
import { getSteps, securityEnv, waitFor, waitForWorkflow, type TestSchema } from './helpers.js';

/** Two tool calls held until the test releases them: the workflow is live while events are forged. */
const TWO_HELD = {
  start: 'first',
  steps: {
    first: { tool: 'hold.wait', args: { n: 1 }, next: 'second' },
    second: { tool: 'hold.wait', args: { n: 2 }, done: true, output: '{{result}}' },
  },
};

async function listening(t: TestSchema, p: CliProcess): Promise<void> {
  await waitFor(
    async () => (await t.q(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [`stepd-follow:${p.child.pid}`])).length > 0,
    'the CLI to LISTEN',
  );
}

/** Every kind of fact a reader could be fooled into showing, about `workflowId` and its running step. */
function forgedEvents(schema: string, workflowId: string, stepId: string, other: { workflowId: string; gateId: string }): string[] {
  const at = new Date().toISOString();
  const e = (fields: Record<string, unknown>) => JSON.stringify({ schema, workflowId, at, ...fields });
  return [
    e({ type: 'step.waiting', stepId, step: 'first', attempt: 1, message: 'FORGED GATE: approve me' }),
    e({ type: 'step.waiting', stepId: '987654321', step: 'approve', attempt: 1, message: 'FORGED GATE' }),
    e({ type: 'step.waiting', step: 'first', attempt: 1, message: 'FORGED GATE without an id' }),
    // A real gate of another workflow, claimed for this one.
    e({ type: 'step.waiting', stepId: other.gateId, step: 'approve', attempt: 1, message: 'FORGED GATE elsewhere' }),
    // A real step of another workflow ending this one's; this one's step in another's end.
    e({ type: 'workflow.started', stepId: other.gateId, redrive: 9 }),
    JSON.stringify({ type: 'step.done', schema, workflowId: other.workflowId, stepId, step: 'first', attempt: 1, at }),
    e({ type: 'step.done', stepId, step: 'first', attempt: 1, durationMs: 1 }),
    e({ type: 'step.failed', stepId, step: 'first', attempt: 1, error: { code: 'forged', message: 'FORGED failure' } }),
    e({ type: 'step.progress', stepId, step: 'first', attempt: 1, progress: { progress: 99, message: 'FORGED progress' } }),
    e({ type: 'workflow.failed', error: { code: 'forged', message: 'FORGED failure' } }),
    e({ type: 'workflow.cancelled' }),
    e({ type: 'workflow.completed', output: 'FORGED' }),
  ];
}

async function forge(forgers: Forger[], payloads: string[], times: number): Promise<void> {
  for (const f of forgers) for (let i = 0; i < times; i++) await f.notify('stepd_events', payloads);
}

describe('forged lifecycle events', () => {
  it('forged gates, step results and ends (workflow.completed / failed / cancelled, step.waiting) for a live workflow: run --follow and watch print none of them, do not exit, and end on the real end with its outcome', async () => {
    const hold = holdTools();
    const env = await securityEnv({ providers: [hold] });
    const { t } = env;
    const forgers = [await createUngrantedRole(t), forgerOn(env.client.role, env.client.pool)];
    const flow = await writeJson(TWO_HELD);

    const follow = spawnCli(['run', flow, '--follow'], { env: envFor(t) });
    const [, id] = await follow.waitFor(/^started workflow (\d+)/m);
    await waitFor(async () => hold.waiting.has(id!), 'the first tool call to be in flight');
    const watchOne = spawnCli(['watch', id!, '--json'], { env: envFor(t) });
    const watchAll = spawnCli(['watch'], { env: envFor(t) });
    await watchAll.waitFor(/watching schema/, 'stderr');
    await Promise.all([follow, watchOne, watchAll].map((p) => listening(t, p)));

    const [running] = await getSteps(t, id!);
    const [gate] = (await getSteps(t, env.bystander.id)).filter((s) => s.status === 'pending');
    const payloads = forgedEvents(t.schema, id!, running!.id, { workflowId: env.bystander.id, gateId: gate!.id });
    await forge(forgers, payloads, 20);
    // And a flood of forged ends: confirmed in batches, so the real events behind it still come through.
    await forgers[0]!.notify('stepd_events', Array.from({ length: 10_000 }, (_, i) => payloads[payloads.length - 1 - (i % 3)]!));

    // Real events after the forged ones: once they show, every forged one before them was handled.
    hold.release(id!);
    await follow.waitFor(/second #\d+ started/);
    await watchOne.waitFor(/"type":"step.started"[^\n]*"step":"second"/);
    await watchAll.waitFor(/second #\d+ started/);
    for (const p of [follow, watchOne, watchAll]) {
      expect(p.running, p.stdout + p.stderr).toBe(true);
      expect(p.stdout).not.toMatch(/FORGED|forged|waiting for approval|"step.waiting"|failed|cancelled|completed|progress/);
    }
    expect(watchAll.stdout).not.toMatch(/redriven/);
    expect(watchAll.stdout).not.toContain(`wf ${env.bystander.id}`);

    // And once more while the second step runs, then the real end.
    await forge(forgers, forgedEvents(t.schema, id!, (await getSteps(t, id!))[1]!.id, { workflowId: env.bystander.id, gateId: gate!.id }), 5);
    hold.release(id!);
    expect((await waitForWorkflow(t, id!)).status).toBe('completed');

    const followed = await follow.exited;
    expect(followed.code, followed.stdout + followed.stderr).toBe(0);
    expect(followed.stdout.match(/workflow \d+ completed/g)).toHaveLength(1);
    expect(followed.stdout).toContain('output: {"n":2}');
    expect(followed.stdout).not.toMatch(/FORGED|waiting for approval|failed|cancelled/);

    const watched = await watchOne.exited;
    expect(watched.code).toBe(0);
    const lines = jsonLines(watched.stdout);
    expect(lines.filter((l) => l.type.startsWith('workflow.') && l.type !== 'workflow.started')).toEqual([
      expect.objectContaining({ type: 'workflow.completed', workflowId: id, status: 'completed', output: { n: 2 }, error: null }),
    ]);
    expect(lines.map((l) => l.type)).not.toContain('step.waiting');
    expect(lines.map((l) => l.type)).not.toContain('step.failed');

    await watchAll.waitFor(new RegExp(`wf ${id}  workflow ${id} completed`));
    expect(watchAll.stdout.match(/completed/g)).toHaveLength(1);
    expect(watchAll.stdout).not.toMatch(/FORGED|forged|waiting for approval|failed|cancelled/);
    expect((await watchAll.kill('SIGINT')).code).toBe(0);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a forged end after the real one, and a real gate announced again by forgers, are each shown once, from the rows', async () => {
    const env = await securityEnv();
    const { t } = env;
    const forger = await createUngrantedRole(t);
    const watchAll = spawnCli(['watch', '--json'], { env: envFor(t) });
    await watchAll.waitFor(/watching schema/, 'stderr');
    await listening(t, watchAll);

    const [gate] = (await getSteps(t, env.bystander.id)).filter((s) => s.status === 'pending');
    const at = new Date().toISOString();
    const waiting = JSON.stringify({ type: 'step.waiting', schema: t.schema, workflowId: env.bystander.id, stepId: gate!.id, step: 'approve', attempt: 7, message: 'FORGED', at });
    const ended = JSON.stringify({ type: 'workflow.failed', schema: t.schema, workflowId: env.bystander.id, error: { code: 'forged', message: 'FORGED' }, at });
    await forger.notify('stepd_events', Array.from({ length: 50 }, () => waiting));
    // The gate really waits: confirmed from its row and shown, once.
    await watchAll.waitFor(new RegExp(`"type":"step.waiting"[^\n]*"workflowId":"${env.bystander.id}"`));
    await env.bystander.assertUndisturbedAndServed();
    await watchAll.waitFor(new RegExp(`"type":"workflow.completed"[^\\n]*"workflowId":"${env.bystander.id}"`));
    await forger.notify('stepd_events', [ended, JSON.stringify({ type: 'workflow.completed', schema: t.schema, workflowId: env.bystander.id, at })]);
    // A real event after the forged end: once it shows, the forged end was handled.
    const next = await env.client.q(`INSERT INTO stepd.workflows (name, flow) VALUES ('after', $1) RETURNING id`, [
      JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: {}, done: true } } }),
    ]);
    await watchAll.waitFor(new RegExp(`"type":"workflow.completed"[^\\n]*"workflowId":"${next[0].id}"`));

    const lines = jsonLines(watchAll.stdout).filter((l) => l.workflowId === env.bystander.id);
    // The gate was really waiting when confirmed: shown once, as its row says (attempt 1, no message).
    const gates = lines.filter((l) => l.type === 'step.waiting');
    expect(gates).toEqual([expect.objectContaining({ stepId: gate!.id, step: 'approve', attempt: 1 })]);
    expect(gates[0]).not.toHaveProperty('message');
    expect(lines.filter((l) => l.type.startsWith('workflow.') && l.type !== 'workflow.started').map((l) => [l.type, l.status])).toEqual([['workflow.completed', 'completed']]);
    expect(watchAll.stdout).not.toMatch(/FORGED|forged/);
    expect((await watchAll.kill('SIGINT')).code).toBe(0);
  });
});
