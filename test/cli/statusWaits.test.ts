/** `stepd status` shows how long a gate or a timer waited (from its creation), not the few ms between its claim and its end. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StepRow, WorkflowRow } from '../../src/db/tables.js';
import { buildStatusView } from '../../src/api/views/statusView.js';
import { renderStatus } from '../../src/api/views/statusText.js';
import { createTestSchema, startExecutor, waitForWorkflow } from '../helpers/db.js';
import { EXAMPLES, envFor, jsonLines, runCli, spawnCli } from './helpers.js';

const t0 = new Date('2025-01-01T12:00:00.000Z');
const at = (ms: number) => new Date(t0.getTime() + ms);

const flow = {
  start: 'ask',
  steps: {
    ask: { approval: true, next: 'pause' },
    pause: { wait: '90s', next: 'work' },
    work: { tool: 'core.echo', done: true },
  },
};

function step(id: string, over: Partial<StepRow> & Pick<StepRow, 'name' | 'status'>): StepRow {
  const base = { id, workflow_id: '7', tool: null, args: null, result: null, error: null, attempt: 1, ready_at: null, started_at: null, completed_at: null, created_at: t0, updated_at: t0 };
  const more = { lease_until: null, executor_id: null, fanout_id: null, item_index: null, expires_at: null, readied_by: null, readied_role: null, readied_at: null };
  return { ...base, ...more, fanout_open: false, first_attempt_id: null, progress: null, ...over } as StepRow;
}

const workflow = { id: '7', name: 'w', flow, input: {}, status: 'completed', output: null, error: null, created_by: null, key: null, created_at: t0, updated_at: t0, started_at: t0, completed_at: at(400_000), cancelled_at: null, step_count: 3 } as unknown as WorkflowRow;

describe('status of gates and timers', () => {
  it('a readied gate and a due timer show how long they waited, with who readied the gate', () => {
    const rows = [
      // Approved after 2 minutes: claimed and completed within 4 ms of the approval.
      step('1', { name: 'ask', status: 'done', created_at: at(0), readied_at: at(120_000), readied_by: 'james', started_at: at(120_002), completed_at: at(120_004) }),
      step('2', { name: 'pause', status: 'done', created_at: at(120_004), ready_at: at(210_004), started_at: at(210_005), completed_at: at(210_008) }),
      step('3', { name: 'work', tool: 'core.echo', status: 'done', created_at: at(210_008), started_at: at(210_010), completed_at: at(210_130) }),
    ];
    const view = buildStatusView(workflow, rows, at(400_000));
    expect(view.steps.map((s) => s.durationMs)).toEqual([120_004, 90_004, 120]);
    expect(renderStatus(view, at(400_000)).slice(1, 4)).toEqual([
      '├─ ask (gate)  #1  done after waiting 2m00s (readied by james)',
      '├─ pause (timer)  #2  done after waiting 1m30s',
      '└─ work (core.echo)  #3  done 120ms',
    ]);
  });

  it('a rejected gate shows how long it waited before it failed', () => {
    const rows = [step('1', { name: 'ask', status: 'failed', created_at: at(0), readied_by: 'ops', started_at: at(45_000), completed_at: at(45_003), error: { code: 'rejected', message: 'no' } })];
    const lines = renderStatus(buildStatusView({ ...workflow, status: 'failed' } as WorkflowRow, rows, at(50_000)), at(50_000));
    expect(lines).toContain('└─ ask (gate)  #1  failed after waiting 45s (readied by ops)');
  });
});

describe('a gate followed and shown by the CLI', () => {
  it('run --follow and status give the gate the time from its creation to its end', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const follow = spawnCli(['run', path.join(EXAMPLES, 'approval.json'), '--follow', '--json'], { env: envFor(t) });
    const [, gateId] = await follow.waitFor(/"type":"step.waiting".*"stepId":"(\d+)"/);
    expect((await runCli(['approve', gateId!], { env: envFor(t) })).code).toBe(0);
    const lines = jsonLines((await follow.exited).stdout);
    const id = lines[0]!.id as string;
    await waitForWorkflow(t, id);

    const [row] = await t.q(`SELECT extract(epoch FROM completed_at - created_at) * 1000 AS waited, extract(epoch FROM completed_at - started_at) * 1000 AS ran FROM stepd.workflow_steps WHERE id = $1`, [gateId]);
    const done = lines.find((e) => e.type === 'step.done' && e.stepId === gateId)!;
    expect(Math.abs(done.durationMs - Number(row.waited))).toBeLessThanOrEqual(1);
    const status = JSON.parse((await runCli(['status', id, '--json'], { env: envFor(t) })).stdout);
    const gate = status.steps.find((s: { id: string }) => s.id === gateId);
    expect(Math.abs(gate.durationMs - Number(row.waited))).toBeLessThanOrEqual(1);
    expect(Number(row.waited)).toBeGreaterThan(Number(row.ran));
  });
});
