/**
 * `stepd retry ID`: the built CLI redrives a failed workflow through the SQL contract (an
 * executor runs in-process), follows it, reports the daemon's decision, and refuses what cannot
 * be redriven before writing anything.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, getSteps, getWorkflow, insertWorkflow, startExecutor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { envFor, jsonLines, runCli, tempDir } from './helpers.js';

/** `test.work`: fails (not retryable) while `broken.on`, else returns `{ok: true}`. */
function switchTool(broken: { on: boolean }): ToolProvider {
  return {
    prefix: 'test',
    async call() {
      if (broken.on) throw new StepError('broken', 'the upstream file is missing', { retryable: false });
      return { ok: true };
    },
    async list() {
      return [{ name: 'work' }];
    },
  };
}

const oneStep = (extra: Record<string, unknown> = {}) => ({
  start: 'fetch',
  ...extra,
  steps: { fetch: { tool: 'test.work', args: {}, retry: { maxAttempts: 1 }, next: 'use' }, use: { tool: 'core.echo', args: { got: '{{steps.fetch.result}}' }, done: true } },
});

async function failedWorkflow(flow: unknown = oneStep()): Promise<{ t: TestSchema; id: string; broken: { on: boolean } }> {
  const t = await createTestSchema();
  const broken = { on: true };
  await startExecutor(t, { tools: [switchTool(broken)] });
  const id = await insertWorkflow(t, flow, {}, { name: 'nightly' });
  expect((await waitForWorkflow(t, id)).status).toBe('failed');
  return { t, id, broken };
}

describe('stepd retry', () => {
  it('--follow redrives the failed step and follows the workflow to completion', async () => {
    const { t, id, broken } = await failedWorkflow();
    broken.on = false;

    const r = await runCli(['retry', id, '--follow'], { env: envFor(t) });

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`redriving workflow ${id} (nightly)`);
    expect(r.stdout).toContain(`workflow ${id} redriven (redrive 1)`);
    expect(r.stdout).toMatch(/fetch #\d+ done in \S+ \(attempt 2\)/);
    expect(r.stdout).toMatch(new RegExp(`workflow ${id} completed`));
    expect(await getWorkflow(t, id)).toMatchObject({ status: 'completed', redrives: 1 });
  });

  it('without --follow writes the request and exits at once; --json gives the row', async () => {
    const { t, id, broken } = await failedWorkflow();
    broken.on = false;

    const r = await runCli(['retry', id, '--json'], { env: envFor(t) });

    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id, name: 'nightly', status: 'running' });
    expect(JSON.parse(r.stdout).redriveRequestedAt).toBeTruthy();
    expect(await waitForWorkflow(t, id)).toMatchObject({ status: 'completed', redrives: 1 });
  });

  it('--follow --json prints the request first, then one event per line to the end', async () => {
    const { t, id, broken } = await failedWorkflow();
    broken.on = false;

    const r = await runCli(['retry', id, '--follow', '--json'], { env: envFor(t) });

    expect(r.code).toBe(0);
    const lines = jsonLines(r.stdout);
    expect(lines[0]).toMatchObject({ id, name: 'nightly', status: 'running' });
    expect(lines).toContainEqual(expect.objectContaining({ type: 'workflow.started', workflowId: id, redrive: 1 }));
    expect(lines[lines.length - 1]).toMatchObject({ type: 'workflow.completed', workflowId: id });
  });

  it('--wait reports that the daemon resumed the workflow', async () => {
    const { t, id, broken } = await failedWorkflow();
    broken.on = false;

    const r = await runCli(['retry', id, '--wait', '--json'], { env: envFor(t) });

    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id, outcome: 'resumed', redrives: 1 });
  });

  it('--wait reports a refusal the daemon made (its caps are stricter than the ones the CLI checked with)', async () => {
    const t = await createTestSchema();
    const broken = { on: true };
    const first = await startExecutor(t, { tools: [switchTool(broken)] });
    const id = await insertWorkflow(t, oneStep({ maxSteps: 50 }), {}, { name: 'nightly' });
    await waitForWorkflow(t, id);
    await first.stop({ graceMs: 0 });
    await startExecutor(t, { tools: [switchTool(broken)], caps: { steps: 10 } });

    const r = await runCli(['retry', id, '--wait'], { env: envFor(t) });

    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(new RegExp(`the daemon refused to redrive workflow ${id}: \\[redrive_refused\\] redrive refused: its flow is not valid`));
    expect(await getWorkflow(t, id)).toMatchObject({ status: 'failed', redrives: 0, error: { code: 'redrive_refused', details: { reason: 'invalid_flow' } } });
  });

  it('refuses a workflow that is not failed, saying what it is, and writes nothing', async () => {
    const { t, id, broken } = await failedWorkflow();
    broken.on = false;
    await runCli(['retry', id], { env: envFor(t) });
    await waitForWorkflow(t, id, ['completed']);

    const r = await runCli(['retry', id], { env: envFor(t) });

    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`stepd: workflow ${id} (nightly) is completed; only a failed workflow can be redriven\n`);
    expect((await getWorkflow(t, id)).redrives).toBe(1);
  });

  it('refuses a workflow whose flow is invalid under the caps of the config, listing the issues, and writes nothing', async () => {
    const { t, id } = await failedWorkflow(oneStep({ maxSteps: 50 }));
    const cwd = await tempDir();
    await writeFile(path.join(cwd, 'stepd.config.json'), JSON.stringify({ caps: { steps: 10 } }));

    const r = await runCli(['retry', id], { env: envFor(t), cwd });

    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`workflow ${id} (nightly) cannot be redriven: its flow is not valid under today's validation and caps (1 issue(s))`);
    expect(r.stderr).toContain("maxSteps: maxSteps 50 is above the operator's cap caps.steps (10)");
    const wf = await getWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'failed', redrive_requested_at: null, error: { code: 'broken' } });
    expect(await getSteps(t, id)).toHaveLength(1);
  });

  it('refuses a workflow the flow failed on purpose', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: {}, done: { status: 'failed', error: 'stop' } } } });
    await waitForWorkflow(t, id);

    const r = await runCli(['retry', id], { env: envFor(t) });

    expect(r.code).toBe(1);
    expect(r.stderr).toContain('the flow itself ended the workflow as failed at step "a"');
  });

  it('--help shows examples and the SQL it writes', async () => {
    const r = await runCli(['retry', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('stepd retry 7 --follow');
    expect(r.stdout).toContain("UPDATE stepd.workflows SET status = 'running' WHERE id = 7 AND status = 'failed';");
  });
});
