import { describe, expect, it } from 'vitest';
import { confirmEvent, factKey, PrintedFacts, type EventRows } from '../../src/cli/eventConfirmation.js';
import type { EventStepRow, EventWorkflowRow } from '../../src/db/reads.js';
import type { StepdEvent } from '../../src/events.js';

const at = '2026-01-01T00:00:00.000Z';
const t0 = new Date(at);
const wf = (status: EventWorkflowRow['status'], extra: Partial<EventWorkflowRow> = {}): EventWorkflowRow =>
  ({ id: '7', status, output: null, error: null, created_at: t0, updated_at: t0, started_at: t0, completed_at: null, cancelled_at: null, redrives: 0, ...extra }) as EventWorkflowRow;
const step = (status: EventStepRow['status'], extra: Partial<EventStepRow> = {}): EventStepRow =>
  ({ id: '42', workflow_id: '7', name: 'approve', tool: null, status, attempt: 1, item_index: null, args: { message: 'Ship it?' }, error: null, progress: null, created_at: t0, started_at: null, completed_at: null, updated_at: t0, ...extra }) as EventStepRow;
const rows = (w?: EventWorkflowRow, s?: EventStepRow): EventRows => ({ workflows: new Map(w ? [['7', w]] : []), steps: new Map(s ? [['42', s]] : []) });
const ev = (fields: Partial<StepdEvent>): StepdEvent => ({ type: 'step.waiting', schema: 'stepd', workflowId: '7', at, ...fields }) as StepdEvent;

describe('an event confirmed from the rows', () => {
  it('an end only when the workflow row has ended that way, with the row\'s status and error', () => {
    const forged = ev({ type: 'workflow.failed', error: { code: 'forged', message: 'FORGED' } });
    expect(confirmEvent(forged, rows(wf('running')), 'stepd')).toBeUndefined();
    expect(confirmEvent(forged, rows(wf('completed', { completed_at: t0 })), 'stepd')).toBeUndefined();
    expect(confirmEvent(forged, rows(), 'stepd')).toBeUndefined();
    expect(confirmEvent(forged, rows(wf('failed', { completed_at: t0, error: { code: 'broken', message: 'real' } })), 'stepd')).toEqual({
      type: 'workflow.failed', schema: 'stepd', workflowId: '7', at, error: { code: 'broken', message: 'real' },
    });
  });

  it('a gate only when its row is a pending gate of that workflow, with the row\'s message', () => {
    const forged = ev({ type: 'step.waiting', stepId: '42', step: 'x', attempt: 9, message: 'FORGED' });
    expect(confirmEvent(forged, rows(wf('running'), step('pending')), 'stepd')).toMatchObject({ stepId: '42', step: 'approve', attempt: 1, message: 'Ship it?' });
    expect(confirmEvent(forged, rows(wf('running'), step('done')), 'stepd')).toBeUndefined();
    expect(confirmEvent(forged, rows(wf('running'), step('pending', { tool: 'hold.wait' })), 'stepd')).toBeUndefined();
    expect(confirmEvent(forged, rows(wf('running'), step('pending', { workflow_id: '8' })), 'stepd')).toBeUndefined();
    expect(confirmEvent(ev({ type: 'step.waiting', step: 'approve' }), rows(wf('running'), step('pending')), 'stepd')).toBeUndefined();
  });

  it('a step\'s result from its row: done and failed only in that state, the error and progress the row holds', () => {
    const running = step('running', { tool: 'hold.wait', progress: { progress: 1, total: 4 } });
    expect(confirmEvent(ev({ type: 'step.failed', stepId: '42', error: { code: 'forged', message: 'F' } }), rows(wf('running'), running), 'stepd')).toBeUndefined();
    expect(confirmEvent(ev({ type: 'step.done', stepId: '42' }), rows(wf('running'), running), 'stepd')).toBeUndefined();
    expect(confirmEvent(ev({ type: 'step.progress', stepId: '42', progress: { progress: 99 } }), rows(wf('running'), running), 'stepd')).toMatchObject({ progress: { progress: 1, total: 4 } });
    const failed = step('failed', { tool: 'hold.wait', error: { code: 'real', message: 'boom' } });
    expect(confirmEvent(ev({ type: 'step.failed', stepId: '42', error: { code: 'forged', message: 'F' } }), rows(wf('running'), failed), 'stepd')).toMatchObject({ error: { code: 'real', message: 'boom' } });
  });

  it('the same fact is printed once, a changed row is a new fact', () => {
    const printed = new PrintedFacts(2);
    const r = rows(wf('running'), step('pending'));
    const e = confirmEvent(ev({ type: 'step.waiting', stepId: '42' }), r, 'stepd')!;
    expect(printed.add(factKey(e, r))).toBe(true);
    expect(printed.add(factKey(e, r))).toBe(false);
    const later = rows(wf('running'), step('pending', { updated_at: new Date(t0.getTime() + 1) }));
    expect(printed.add(factKey(e, later))).toBe(true);
  });
});
