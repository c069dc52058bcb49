/**
 * The log line for outcomes the queue gives up on (the executor is stopping, or recording failed
 * past its attempts), saying who takes each up: a step this executor ran is still `running`, so
 * once its lease runs out the watchdog retries it; a readied signal wait (guard `signalled`) was
 * never claimed and is still `ready`, so the next signal pickup, on this executor or another,
 * records it. One line for each kind present. Logging only: what happens to them is the same.
 */
import type { Logger } from '../../logger.js';
import type { FinishInput } from '../core/txTypes.js';

/** Why the outcomes were not recorded: `stopping` (warn) or `failed` past the attempts (error, with `err`). */
export type NotRecordedReason = 'stopping' | 'failed';

const MESSAGES: Record<NotRecordedReason, { steps: string; waits: string }> = {
  stopping: {
    steps: 'outcomes not recorded before stopping; the watchdog will retry their steps',
    waits: 'signal waits not recorded before stopping; they stay ready, and the next signal pickup (here or on another executor) records them',
  },
  failed: {
    steps: 'could not record step outcomes; the watchdog will retry the steps',
    waits: 'could not record signal waits; they stay ready, and the next signal pickup (here or on another executor) records them',
  },
};

export function logNotRecorded(log: Logger, reason: NotRecordedReason, inputs: readonly FinishInput[], err?: unknown): void {
  const waits = inputs.filter((i) => i.guard === 'signalled').map((i) => i.stepId);
  const steps = inputs.filter((i) => i.guard !== 'signalled').map((i) => i.stepId);
  const say = (stepIds: string[], msg: string) => {
    if (stepIds.length === 0) return;
    if (reason === 'failed') log.error({ err, stepIds }, msg);
    else log.warn({ stepIds }, msg);
  };
  say(steps, MESSAGES[reason].steps);
  say(waits, MESSAGES[reason].waits);
}
