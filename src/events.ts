/**
 * Lifecycle events: every transition NOTIFYs one small JSON event on channel `stepd_events`
 * after commit. The same zod schema is used by the emitters and by readers (`watch`, `--follow`).
 *
 * Who emits what:
 *   executor (src/executor/*)        workflow.started/completed/failed, step.done/failed/retrying/waiting,
 *                                    step.progress (a running step's tool reported progress; throttled)
 *   database (sql/0003_events.sql)   step.started (a ready step was claimed),
 *                                    workflow.cancelled (anyone set status = 'cancelled')
 *
 * The payload (README "Events" documents it for other languages):
 *   { "type": "step.done", "schema": "stepd", "workflowId": "7", "stepId": "42", "step": "search",
 *     "attempt": 1, "at": "2025-01-01T12:00:00.000Z" }
 * Ids are strings (bigint). Readers must ignore fields they do not know and events they cannot
 * parse: the channel is shared by every schema (installation) in the database. And an event is a
 * hint, never a fact: any role that can connect may NOTIFY anything on any channel, so readers
 * confirm what an event says from the rows before showing it or acting on it (src/cli/eventConfirmation.ts).
 */
import { z } from 'zod';

export const EVENTS_CHANNEL = 'stepd_events';

export const eventType = z.enum([
  'workflow.started',
  'workflow.completed',
  'workflow.failed',
  'workflow.cancelled',
  'step.started',
  'step.done',
  'step.failed',
  'step.retrying',
  'step.waiting',
  'step.progress',
]);

/**
 * Ids arrive as strings from the executor and may arrive as numbers from SQL triggers; anything
 * else that claims to be an id (a sign, other digits, 7,000 characters) makes the event unparseable.
 */
const id = z.union([z.string().regex(/^(0|[1-9][0-9]{0,18})$/), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)]).transform((v) => String(v));

export const stepdEvent = z
  .object({
    type: eventType,
    /** The schema the tables live in, so one channel can serve several installations. */
    schema: z.string(),
    workflowId: id,
    stepId: id.optional(),
    step: z.string().optional(),
    attempt: z.number().int().optional(),
    /** The step's position in a forEach (or its branch number in a parallel), when it is in a fan-out. */
    itemIndex: z.number().int().optional(),
    /** For step.retrying: when the next attempt becomes ready (ms from now). */
    retryInMs: z.number().optional(),
    /** For step.done / step.failed: how long the attempt ran, when the emitter knows it. */
    durationMs: z.number().optional(),
    error: z.object({ code: z.string(), message: z.string() }).passthrough().optional(),
    /** For step.progress: what the tool reported last (as stored in workflow_steps.progress). */
    progress: z.object({ progress: z.number(), total: z.number().optional(), message: z.string().optional() }).passthrough().optional(),
    /** For step.waiting of a signal wait: what it waits for (as stored in its row's args.signal). */
    signal: z.object({ names: z.array(z.string()), key: z.string().nullable(), since: z.string().nullable() }).passthrough().optional(),
    at: z.string(),
  })
  .passthrough();

export type StepdEvent = z.infer<typeof stepdEvent>;
export type StepdEventType = z.infer<typeof eventType>;

/** The events that end a workflow; `watch ID` and `run --follow` stop after one. */
export const TERMINAL_EVENTS: ReadonlySet<StepdEventType> = new Set(['workflow.completed', 'workflow.failed', 'workflow.cancelled']);

export function parseEvent(payload: string): StepdEvent | undefined {
  try {
    const parsed = stepdEvent.safeParse(JSON.parse(payload));
    return parsed.success ? withIsoTime(parsed.data) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `at` in one format, `2025-01-01T12:00:00.000Z`: the executor writes that, but the SQL triggers
 * write PostgreSQL's (`2025-01-01T12:00:00.123456+00:00`). An event whose time is no time is unparseable.
 */
function withIsoTime(event: StepdEvent): StepdEvent | undefined {
  const ms = Date.parse(event.at);
  return Number.isNaN(ms) ? undefined : { ...event, at: new Date(ms).toISOString() };
}

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; stay well under it. */
const MAX_PAYLOAD_BYTES = 7_000;

/**
 * An event as a NOTIFY payload. The error of a failed step is reduced to its code and message
 * (its details may hold a whole response body), and cut further if it is still too long: an
 * event never makes the transition that announces it fail.
 */
export function eventPayload(event: StepdEvent): string {
  const slim: StepdEvent = event.error ? { ...event, error: { code: event.error.code, message: event.error.message } } : event;
  let text = JSON.stringify(slim);
  // A UTF-16 code unit is at most 3 bytes of UTF-8: a short payload needs no count.
  if (text.length * 3 <= MAX_PAYLOAD_BYTES) return text;
  if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES && slim.error) {
    text = JSON.stringify({ ...slim, error: { code: slim.error.code, message: `${slim.error.message.slice(0, 1_000)}…` } });
  }
  if (Buffer.byteLength(text) > MAX_PAYLOAD_BYTES) {
    const { error: _e, ...rest } = slim;
    text = JSON.stringify(rest);
  }
  return text;
}
