/**
 * A step waiting for a signal, as every reader shows it (pure: rows in, text out): `stepd status`
 * says what it waits for and offers no approve; a `step.waiting` event is printed from the row
 * (names, key, since), whatever the event claimed; the dashboard lists it without approve or
 * reject buttons.
 */
import { describe, expect, it } from 'vitest';
import { buildStatusView } from '../../src/api/views/statusView.js';
import { renderStatus } from '../../src/api/views/statusText.js';
import { confirmEvent, type EventRows } from '../../src/cli/eventConfirmation.js';
import { describeEvent } from '../../src/cli/follow.js';
import { renderWorkflowLive } from '../../src/http/dashboard/workflowPage.js';
import type { EventStepRow, EventWorkflowRow } from '../../src/db/reads.js';
import type { StepRow, WorkflowRow } from '../../src/db/tables.js';
import type { StepdEvent } from '../../src/events.js';

const t0 = new Date('2026-01-01T12:00:00.000Z');
const now = new Date(t0.getTime() + 125_000);
const waitArgs = { signal: { names: ['payment.received'], key: 'order-42', since: t0.toISOString() } };

const flow = {
  start: 'reserve',
  steps: {
    reserve: { tool: 'core.echo', args: {}, next: 'await_payment' },
    await_payment: { signal: { name: 'payment.received', key: '{{input.orderId}}', timeout: '1h' }, next: 'ship' },
    ship: { tool: 'core.echo', args: {}, done: true },
  },
};
const workflow = { id: '7', name: 'order', flow, input: { orderId: 'order-42' }, status: 'running', output: null, error: null, created_by: 'shop', key: null, created_at: t0, updated_at: t0, started_at: t0, completed_at: null, cancelled_at: null, step_count: 2 } as unknown as WorkflowRow;

function row(id: string, over: Partial<StepRow> & Pick<StepRow, 'name' | 'status'>): StepRow {
  const base = { id, workflow_id: '7', tool: null, args: null, result: null, error: null, attempt: 1, ready_at: null, started_at: null, completed_at: null, created_at: t0, updated_at: t0 };
  const more = { lease_until: null, executor_id: null, fanout_id: null, item_index: null, expires_at: null, readied_by: null, readied_role: null, readied_at: null, child_id: null };
  return { ...base, ...more, fanout_open: false, first_attempt_id: null, progress: null, ...over } as StepRow;
}

const rows = [
  row('1', { name: 'reserve', tool: 'core.echo', status: 'done', started_at: t0, completed_at: t0 }),
  row('2', { name: 'await_payment', status: 'pending', args: waitArgs, expires_at: new Date(t0.getTime() + 3_600_000) }),
];

describe('a step waiting for a signal', () => {
  it('stepd status says what it waits for, since when and how to send it, and offers no approve', () => {
    const view = buildStatusView(workflow, rows, now);
    expect(view.waiting).toEqual([]);
    expect(view.signals).toEqual([
      { stepId: '2', name: 'await_payment', names: ['payment.received'], key: 'order-42', since: t0.toISOString(), expiresAt: new Date(t0.getTime() + 3_600_000).toISOString(), send: 'stepd signal payment.received --key order-42' },
    ]);
    expect(view.steps[1]!.approve).toBeUndefined();
    const text = renderStatus(view, now).join('\n');
    expect(text).toMatch(/await_payment .*#2 {2}waits for signal payment\.received \(key order-42\) since \d\d:\d\d:\d\d \(2m05s ago\), expires in 57m55s → stepd signal payment\.received --key order-42/);
    expect(text).toMatch(/^waiting: step 2 \(await_payment\) waits for signal payment\.received \(key order-42\) since .* — send it: stepd signal payment\.received --key order-42 --payload '\{…\}'$/m);
    expect(text).not.toContain('stepd approve');
  });

  it('a wait for any of several names and any key, done with the signal it got', () => {
    const either = { signal: { names: ['payment.received', 'order.cancelled'], key: null, since: t0.toISOString() } };
    const view = buildStatusView(workflow, [row('2', { name: 'await_payment', status: 'pending', args: either })], now);
    expect(renderStatus(view, now).join('\n')).toContain('waits for signal payment.received or order.cancelled (any key) since');
    const done = buildStatusView(workflow, [row('2', { name: 'await_payment', status: 'done', args: either, completed_at: now, result: { id: '17', name: 'order.cancelled', key: null, payload: {}, at: now.toISOString(), role: 'shop' } })], now);
    expect(renderStatus(done, now).join('\n')).toContain('done after waiting 2m05s for signal payment.received or order.cancelled (any key): got order.cancelled #17 from role shop');
    expect(done.signals).toEqual([]);
  });

  it('its step.waiting event is printed from the row: names, key and since, never a forged message or approve command', () => {
    const wfRow = { id: '7', status: 'running', output: null, error: null, created_at: t0, updated_at: t0, started_at: t0, completed_at: null, cancelled_at: null, redrives: 0 } as unknown as EventWorkflowRow;
    const stepRow = { id: '2', workflow_id: '7', name: 'await_payment', tool: null, status: 'pending', attempt: 1, item_index: null, args: waitArgs, error: null, progress: null, created_at: t0, started_at: null, completed_at: null, updated_at: t0 } as unknown as EventStepRow;
    const eventRows: EventRows = { workflows: new Map([['7', wfRow]]), steps: new Map([['2', stepRow]]) };
    const forged = { type: 'step.waiting', schema: 'stepd', workflowId: '7', stepId: '2', step: 'x', message: 'approve me', signal: { names: ['forged'], key: 'k', since: 'x' }, at: now.toISOString() } as StepdEvent;
    const fact = confirmEvent(forged, eventRows, 'stepd')!;
    expect(fact).toMatchObject({ step: 'await_payment', signal: waitArgs.signal });
    expect(fact.message).toBeUndefined();
    const line = describeEvent(fact);
    expect(line).toMatch(/^await_payment #2 waits for signal payment\.received \(key order-42\) since \d\d:\d\d:\d\d \(2m05s ago\) → stepd signal payment\.received --key order-42$/);
    expect(line).not.toContain('approve');
  });

  it('the dashboard lists it under "Waiting for signals" with no approve or reject form', () => {
    const view = buildStatusView(workflow, rows, now);
    const page = String(renderWorkflowLive({ user: 'alice', signedIn: false, csrf: 'c', nonce: 'n' }, { workflow: view.workflow, steps: view.steps, waiting: view.waiting, signals: view.signals }, now));
    expect(page).toContain('Waiting for signals');
    expect(page).toContain('data-signal-step-id="2"');
    expect(page).toMatch(/waits for signal payment\.received \(key order-42\) since/);
    expect(page).not.toContain('/steps/2/approve');
    expect(page).not.toContain('/steps/2/reject');
    expect(page).not.toContain('Waiting for approval');
  });
});
