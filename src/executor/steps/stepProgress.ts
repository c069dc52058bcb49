/**
 * Where a running step's progress reports go: each attempt gets a sink that checks the report,
 * keeps the latest (ProgressThrottle) and writes it to the step row with a `step.progress` event
 * (recordProgressIfRunning: only while this attempt runs under this executor).
 */
import { EVENTS_CHANNEL } from '../../events.js';
import { recordProgressIfRunning, type Queryable, type StepProgress } from '../../db/queries.js';
import type { Logger } from '../../logger.js';
import type { ToolProgress } from '../../tools/tool.js';
import { ProgressThrottle, type Schedule } from './progressThrottle.js';

/** At most one progress write per step per this many ms, by default. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 500;
/** How long the end of a call waits for the last progress write (a database that is away must not hold the outcome). */
const CLOSE_WAIT_MS = 1_000;
/** A progress message longer than this is cut (the event must stay far below NOTIFY's 8000 bytes). */
const MAX_MESSAGE_CHARS = 500;

export interface StepProgressDeps {
  pool: Queryable;
  executorId: string;
  schema: string;
  emitEvents: boolean;
  log: Logger;
  intervalMs?: number;
  now?: () => number;
  schedule?: Schedule;
}

export interface StepProgressSink {
  /** Takes a report (an invalid one is dropped); never throws. */
  report(progress: ToolProgress): void;
  /**
   * The call returned: writes a report still waiting, then nothing more. Resolves when that
   * write is done, or after a second at most (the write itself is fenced on the running attempt,
   * so landing later changes nothing).
   */
  close(): Promise<void>;
}

export function stepProgressSink(deps: StepProgressDeps, step: { id: string; workflow_id: string; name: string }): StepProgressSink {
  let failures = 0;
  // Made on the first report: most calls report nothing and then cost nothing here.
  let throttle: ProgressThrottle<StepProgress> | undefined;
  let closed = false;
  const write = async (progress: StepProgress): Promise<void> => {
    try {
      await recordProgressIfRunning(deps.pool, {
        stepId: step.id,
        executorId: deps.executorId,
        progress,
        notify: deps.emitEvents ? { channel: EVENTS_CHANNEL, schema: deps.schema } : null,
      });
    } catch (err) {
      // Progress is best effort: a database that is away costs one debug line per step.
      if (failures++ === 0) deps.log.debug({ err, workflowId: step.workflow_id, stepId: step.id, step: step.name }, 'step progress not recorded');
    }
  };
  return {
    report: (p) => {
      const value = closed ? undefined : cleanProgress(p);
      if (!value) return;
      throttle ??= new ProgressThrottle<StepProgress>({
        intervalMs: deps.intervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS,
        write,
        ...(deps.now ? { now: deps.now } : {}),
        ...(deps.schedule ? { schedule: deps.schedule } : {}),
      });
      throttle.push(value);
    },
    close: async () => {
      closed = true;
      if (!throttle) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([throttle.close(), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
      clearTimeout(timer);
    },
  };
}

/** A report as stored: a finite `progress`, a finite `total` and a cut `message` when given. */
export function cleanProgress(p: unknown): StepProgress | undefined {
  if (typeof p !== 'object' || p === null) return undefined;
  const { progress, total, message } = p as Record<string, unknown>;
  if (typeof progress !== 'number' || !Number.isFinite(progress)) return undefined;
  const out: StepProgress = { progress };
  if (typeof total === 'number' && Number.isFinite(total)) out.total = total;
  if (typeof message === 'string' && message !== '') out.message = message.length > MAX_MESSAGE_CHARS ? `${message.slice(0, MAX_MESSAGE_CHARS)}…` : message;
  return out;
}
