/** The status tree, from rows, without a database. */
import { describe, expect, it } from 'vitest';
import type { StepRow, WorkflowRow } from '../../src/db/tables.js';
import { buildStatusView } from '../../src/api/views/statusView.js';
import { renderStatus } from '../../src/api/views/statusText.js';
import { formatDuration } from '../../src/api/views/format.js';

const t0 = new Date('2025-01-01T12:00:00.000Z');
const at = (ms: number) => new Date(t0.getTime() + ms);

function workflow(over: Partial<WorkflowRow> = {}): WorkflowRow {
  return {
    id: '7',
    name: 'research',
    flow: {
      start: 'enrich',
      steps: {
        enrich: { forEach: { items: '{{input.items}}', step: 'summarize' }, join: 'approve' },
        summarize: { tool: 'core.echo', args: { text: '{{item}}' }, retry: { maxAttempts: 3 } },
        approve: { approval: { timeout: '1h' }, next: 'report' },
        report: { tool: 'core.echo', done: true },
      },
    },
    input: { items: ['a', 'b'] },
    status: 'running',
    output: null,
    error: null,
    created_by: 'james',
    created_role: null,
    key: null,
    created_at: t0,
    updated_at: t0,
    started_at: t0,
    completed_at: null,
    cancelled_at: null,
    deadline_at: null,
    step_count: 5,
    flow_version: null,
    start_at: null,
    parent_id: null,
    parent_step_id: null,
    depth: 0,
    redrive_requested_at: null,
    redrives: 0,
    ...over,
  };
}

let nextId = 10;
function step(over: Partial<StepRow> & Pick<StepRow, 'name' | 'status'>): StepRow {
  return {
    id: String(nextId++),
    workflow_id: '7',
    tool: null,
    args: null,
    result: null,
    error: null,
    attempt: 1,
    ready_at: null,
    started_at: null,
    completed_at: null,
    created_at: t0,
    updated_at: t0,
    lease_until: null,
    executor_id: null,
    fanout_id: null,
    item_index: null,
    expires_at: null,
    readied_by: null,
    readied_role: null,
    readied_at: null,
    fanout_open: false,
    first_attempt_id: null,
    progress: null,
    child_id: null,
    ...over,
  };
}

describe('status tree', () => {
  it('nests fan-out items under their fork, shows attempts, errors, and the waiting gate with its approve command', () => {
    nextId = 10;
    const fork = step({ name: 'enrich', status: 'done', result: { items: ['a', 'b'] }, started_at: t0, completed_at: t0 });
    const rows = [
      fork,
      step({ name: 'summarize', tool: 'core.echo', status: 'done', fanout_id: fork.id, item_index: 0, started_at: at(0), completed_at: at(120) }),
      step({ name: 'summarize', tool: 'core.echo', status: 'failed', fanout_id: fork.id, item_index: 1, started_at: at(0), completed_at: at(1_500), error: { code: 'timeout', message: 'too slow' } }),
      step({ name: 'summarize', tool: 'core.echo', status: 'done', attempt: 2, fanout_id: fork.id, item_index: 1, started_at: at(2_000), completed_at: at(2_050) }),
      step({ name: 'approve', status: 'pending', created_at: at(3_000), expires_at: at(3_000 + 3_600_000) }),
    ];
    const now = at(63_000);

    const view = buildStatusView(workflow(), rows, now);
    const lines = renderStatus(view, now);

    expect(lines).toEqual([
      'workflow 7 "research": running for 1m03s  (as james)',
      '├─ enrich (fork)  #10  done: fanned out over 2 item(s)',
      '│  ├─ [item 0]',
      '│  │  └─ summarize (core.echo)  #11  done 120ms',
      '│  └─ [item 1]',
      '│     ├─ summarize (core.echo)  #12  failed 1.5s  attempt 1/3',
      '│     │  error: [timeout] too slow',
      '│     └─ summarize (core.echo)  #13  done 50ms  attempt 2/3',
      '└─ approve (gate)  #14  waiting for approval (1m00s, expires in 59m00s) → stepd approve 14',
      'waiting: step 14 (approve) — approve: stepd approve 14   reject: stepd approve 14 --reject --reason "…"',
    ]);
    expect(view.waiting).toEqual([
      { stepId: '14', name: 'approve', since: at(3_000).toISOString(), expiresAt: at(3_603_000).toISOString(), approve: 'stepd approve 14', reject: 'stepd approve 14 --reject --reason "…"' },
    ]);
    expect(view.steps[2]).toMatchObject({ kind: 'tool', maxAttempts: 3, fanoutId: '10', itemIndex: 1, durationMs: 1_500 });
  });

  it('shows a non-retryable failure without an attempt count that promises more attempts', () => {
    nextId = 10;
    const rows = [
      step({ name: 'summarize', tool: 'core.echo', status: 'failed', started_at: at(0), completed_at: at(20), error: { code: 'bad_args', message: 'no', retryable: false } }),
    ];
    const view = buildStatusView(workflow(), rows, at(1_000));
    const line = renderStatus(view, at(1_000)).find((l) => l.includes('summarize'))!;
    expect(line).toMatch(/failed 20ms  not retryable$/);
    expect(line).not.toMatch(/attempt 1\/3/);
    const later = step({ name: 'summarize', tool: 'core.echo', status: 'failed', attempt: 2, started_at: at(0), completed_at: at(20), error: { code: 'rejected', message: 'no', retryable: false } });
    expect(renderStatus(buildStatusView(workflow(), [later], at(1_000)), at(1_000)).find((l) => l.includes('summarize'))).toMatch(/attempt 2, not retryable$/);
  });

  it('shows a failed workflow with its error and the issues of an invalid flow', () => {
    const view = buildStatusView(
      workflow({
        status: 'failed',
        flow: { start: 'a', steps: { a: { tool: 'core.echo', next: 'b' } } },
        completed_at: at(5),
        error: { code: 'invalid_flow', message: 'flow is invalid: 1 issue(s)', issues: [{ path: 'steps.a.next', message: 'no step "b"' }] },
        step_count: 0,
      }),
      [],
    );
    expect(renderStatus(view)).toEqual([
      'workflow 7 "research": failed in 5ms  (as james)',
      '  error: [invalid_flow] flow is invalid: 1 issue(s)',
      '    steps.a.next: no step "b"',
      '  (no steps)',
    ]);
  });

  it('shows the latest progress of a running step, in the tree and in the JSON view', () => {
    nextId = 20;
    const rows = [
      step({ name: 'report', tool: 'core.echo', status: 'running', started_at: t0, progress: { progress: 3, total: 5, message: 'Analyzing content' } }),
    ];
    const now = at(4_000);
    const view = buildStatusView(workflow({ flow: { start: 'report', steps: { report: { tool: 'core.echo', done: true } } } }), rows, now);
    expect(renderStatus(view, now)).toContain('└─ report (core.echo)  #20  running for 4s, progress 3/5 (60%): Analyzing content');
    expect(view.steps[0]?.progress).toEqual({ progress: 3, total: 5, message: 'Analyzing content' });
  });

  it('formats durations', () => {
    expect([0, 70, 1_000, 1_234, 12_345, 125_000, 3_725_000, 2 * 86_400_000 + 3_600_000].map(formatDuration)).toEqual([
      '0ms',
      '70ms',
      '1s',
      '1.23s',
      '12.3s',
      '2m05s',
      '1h02m',
      '2d01h',
    ]);
  });
});
