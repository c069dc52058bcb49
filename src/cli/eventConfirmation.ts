/**
 * Events are hints: any role that can connect may NOTIFY on `stepd_events` (PostgreSQL has no
 * privilege for channels), so `stepd watch` and `run --follow` print an event only once the rows
 * confirm it, and take what they print from the rows, not from the payload: an end from the
 * workflow row (its status, output and error), a waiting gate from its step row (pending, a gate
 * of that workflow, its message and refusal; for a signal wait, the names, key and since it waits for), a step's end, progress or error from its attempt's
 * row. An event about a workflow or step that does not exist, or whose row says otherwise, is
 * dropped. Rows are read for a whole batch of events in two statements (readEventRows); the rest
 * is pure.
 */
import type { Kysely } from 'kysely';
import { getStepsForEvents, getWorkflowsForEvents, type EventStepRow, type EventWorkflowRow } from '../db/reads.js';
import type { Database, WorkflowRow } from '../db/tables.js';
import { TERMINAL_EVENTS, type StepdEvent } from '../events.js';
import { between } from '../api/views/format.js';
import { waitingSignalOf } from '../api/views/signalWait.js';

export interface EventRows {
  workflows: Map<string, EventWorkflowRow>;
  steps: Map<string, EventStepRow>;
}

/** The rows a batch of events names: two statements, however many events. */
export async function readEventRows(db: Kysely<Database>, events: readonly StepdEvent[]): Promise<EventRows> {
  const workflowIds = new Set(events.map((e) => e.workflowId));
  const stepIds = new Set(events.flatMap((e) => (e.stepId !== undefined ? [e.stepId] : [])));
  const [workflows, steps] = await Promise.all([getWorkflowsForEvents(db, [...workflowIds]), getStepsForEvents(db, [...stepIds])]);
  return { workflows: new Map(workflows.map((w) => [String(w.id), w])), steps: new Map(steps.map((s) => [String(s.id), s])) };
}

const ENDED: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

/** The end event a workflow row states (undefined while it has not ended): what is printed for an end. */
export function endEventOf(row: EventWorkflowRow | WorkflowRow, schema: string): StepdEvent | undefined {
  if (!ENDED.has(row.status)) return undefined;
  const at = row.completed_at ?? row.cancelled_at ?? row.updated_at;
  return {
    type: `workflow.${row.status as 'completed' | 'failed' | 'cancelled'}`,
    schema,
    workflowId: String(row.id),
    at: new Date(at).toISOString(),
    ...(row.error ? { error: { code: String(row.error.code), message: String(row.error.message) } } : {}),
  };
}

/**
 * The event as the rows confirm it (its facts taken from them), or undefined when they do not:
 * the workflow must exist; an end must be the row's status; a step event must name an attempt of
 * that workflow whose row is in the state the event claims.
 */
export function confirmEvent(e: StepdEvent, rows: EventRows, schema: string): StepdEvent | undefined {
  const wf = rows.workflows.get(e.workflowId);
  if (!wf) return undefined;
  if (TERMINAL_EVENTS.has(e.type)) return wf.status === e.type.slice('workflow.'.length) ? endEventOf(wf, schema) : undefined;
  if (e.type === 'workflow.started') {
    if (wf.status === 'new') return undefined;
    const { redrive: _claimed, ...rest } = e;
    return typeof e.redrive === 'number' && wf.redrives > 0 ? { ...rest, redrive: wf.redrives } : rest;
  }
  const row = e.stepId !== undefined ? rows.steps.get(e.stepId) : undefined;
  if (!row || String(row.workflow_id) !== e.workflowId) return undefined;
  const { error: _e, message: _m, progress: _p, durationMs: _d, ...rest } = e;
  const base: StepdEvent = { ...rest, step: row.name, attempt: e.type === 'step.retrying' ? row.attempt + 1 : row.attempt };
  if (row.item_index !== null) base.itemIndex = row.item_index;
  const error = row.error ? { error: { code: String(row.error.code), message: String(row.error.message) } } : {};
  switch (e.type) {
    case 'step.started':
      return row.status === 'pending' || row.status === 'ready' ? undefined : base;
    case 'step.retrying':
      return base;
    case 'step.done':
    case 'step.failed': {
      if (row.status !== e.type.slice('step.'.length)) return undefined;
      // A row without a tool (a gate, a timer) is claimed only once readied or due: it took as long as it waited.
      const ms = between(row.tool === null ? row.created_at : row.started_at, row.completed_at);
      return { ...base, ...(ms !== undefined ? { durationMs: ms } : {}), ...(e.type === 'step.failed' ? error : {}) };
    }
    case 'step.waiting': {
      if (row.status !== 'pending' || row.tool !== null) return undefined;
      // A signal wait says what it waits for (from its row, whatever the event claimed); a gate its message.
      const { signal: _s, ...waiting } = base;
      const signal = waitingSignalOf(row);
      if (signal) return { ...waiting, signal: { ...signal } };
      const message = (row.args as { message?: unknown } | null)?.message;
      return { ...waiting, ...(typeof message === 'string' ? { message } : {}), ...error };
    }
    case 'step.progress':
      return row.status === 'running' && row.progress ? { ...base, progress: row.progress } : undefined;
  }
  return undefined;
}

/**
 * What a confirmed event states, as a key: a forged copy of a real event confirms to the same
 * fact and is printed once. A gate refused again or a workflow ended again after a redrive is a
 * new fact (its row changed).
 */
export function factKey(e: StepdEvent, rows: EventRows): string {
  const changed = e.stepId !== undefined ? rows.steps.get(e.stepId)?.updated_at : rows.workflows.get(e.workflowId)?.updated_at;
  return `${e.type}:${e.workflowId}:${e.stepId ?? ''}:${e.attempt ?? ''}:${changed ? new Date(changed).getTime() : ''}`;
}

/** The facts printed lately (at most `capacity`, the oldest forgotten first). */
export class PrintedFacts {
  private readonly keys = new Set<string>();

  constructor(private readonly capacity = 10_000) {}

  /** Records the fact; false when it was printed already. */
  add(key: string): boolean {
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    if (this.keys.size > this.capacity) this.keys.delete(this.keys.values().next().value!);
    return true;
  }
}
