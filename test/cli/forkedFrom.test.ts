/**
 * A fork names its source (sql/0031 `forked_from`, `fork_step`) where a user looks at it:
 * `stepd status` (text and --json), `stepd list` (text and --json) and the dashboard's page.
 */
import { describe, expect, it } from 'vitest';
import { renderWorkflowLive } from '../../src/http/dashboard/workflowPage.js';
import { createTestSchema, insertWorkflow, startExecutor, waitForWorkflow } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';

const CHAIN = {
  start: 'fetch',
  steps: {
    fetch: { tool: 'core.echo', args: { rows: '{{input.rows}}' }, next: 'double' },
    double: { tool: 'core.echo', args: { got: '{{steps.fetch.result.rows}}' }, done: true },
  },
};

describe('a forked workflow shows where it came from', () => {
  it('in stepd status, stepd list and the dashboard', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const env = envFor(t);
    const src = await insertWorkflow(t, CHAIN, { rows: 2 }, { name: 'report', user: 'alice' });
    await waitForWorkflow(t, src);
    const fromStep = JSON.parse((await runCli(['fork', src, '--from', 'double', '--json'], { env })).stdout).id as string;
    const whole = JSON.parse((await runCli(['fork', src, '--json'], { env })).stdout).id as string;
    await waitForWorkflow(t, fromStep);
    await waitForWorkflow(t, whole);

    const status = await runCli(['status', fromStep], { env });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout.split('\n')[1]).toBe(`  forked from workflow ${src} at step "double"`);
    expect((await runCli(['status', whole], { env })).stdout).toContain(`  forked from workflow ${src} (from its start)`);
    expect((await runCli(['status', src], { env })).stdout).not.toContain('forked from');
    const json = JSON.parse((await runCli(['status', fromStep, '--json'], { env })).stdout);
    expect(json.workflow.forkedFrom).toEqual({ workflowId: src, fromStep: 'double' });
    expect(JSON.parse((await runCli(['status', src, '--json'], { env })).stdout).workflow.forkedFrom).toBeNull();

    const list = await runCli(['list'], { env });
    const lineOf = (id: string) => list.stdout.split('\n').find((l) => l.startsWith(`${id} `)) ?? '';
    expect(lineOf(fromStep)).toContain(`fork of ${src}`);
    expect(lineOf(whole)).toContain(`fork of ${src}`);
    expect(lineOf(src)).not.toContain('fork of');
    const listed = JSON.parse((await runCli(['list', '--json'], { env })).stdout) as { id: string; forkedFrom: string | null }[];
    expect(listed.map((w) => [w.id, w.forkedFrom])).toEqual([[whole, src], [fromStep, src], [src, null]]);

    // The dashboard's workflow page: a link to the source.
    const html = String(renderWorkflowLive({ user: 'alice', csrf: 'x' } as never, { workflow: json.workflow, steps: json.steps, waiting: [], signals: [] } as never));
    expect(html).toContain(`<dt>forked from</dt><dd id="workflow-forked-from"><a href="/workflows/${src}">workflow ${src}</a> at step double</dd>`);
  });
});
