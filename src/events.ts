/**
 * Lifecycle events: every transition NOTIFYs one small JSON event on channel `stepd_events`
 * after commit. The same zod schema is used by the emitter and by readers (`watch`, `--follow`).
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
]);

export const stepdEvent = z.object({
  type: eventType,
  /** The schema the tables live in, so one channel can serve several installations. */
  schema: z.string(),
  workflowId: z.string(),
  stepId: z.string().optional(),
  step: z.string().optional(),
  attempt: z.number().int().optional(),
  /** For step.retrying: when the next attempt becomes ready (ms from now). */
  retryInMs: z.number().optional(),
  error: z.object({ code: z.string(), message: z.string() }).passthrough().optional(),
  at: z.string(),
});

export type StepdEvent = z.infer<typeof stepdEvent>;
export type StepdEventType = z.infer<typeof eventType>;

export function parseEvent(payload: string): StepdEvent | undefined {
  try {
    const parsed = stepdEvent.safeParse(JSON.parse(payload));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
