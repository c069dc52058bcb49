/**
 * The second half of a graceful stop, once the claim loop and the watchdog have stopped:
 * prefetched steps that never started are handed back at once; running steps get the grace
 * period, then are aborted and handed back as ready without spending an attempt; outcomes wait
 * for the database as long as the grace period allows (then the leader rescues their steps: this
 * executor's row stays, goes stale and counts as dead); last, the heartbeat, the listener and
 * the pool.
 */
import type pg from 'pg';
import { StepError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Heartbeat } from './heartbeat.js';
import type { Listener } from '../wakeups/listener.js';
import type { OutcomeQueue } from '../outcomes/outcomeQueue.js';
import { handBackRunning } from './recovery.js';
import type { RunningTasks } from '../claims/runningTasks.js';

export interface ShutdownParts {
  pool: pg.Pool;
  executorId: string;
  schema: string;
  log: Logger;
  running: RunningTasks;
  outcomes: OutcomeQueue;
  heartbeat: Heartbeat;
  listener: Listener;
}

export async function drainAndClose(p: ShutdownParts, graceMs: number): Promise<void> {
  const handBack = { pool: p.pool, executorId: p.executorId, schema: p.schema, log: p.log };
  const reason = new StepError('shutdown', 'executor is shutting down', { retryable: true });
  let leftRunning = false;
  const unstarted = p.running.releaseWaiting(reason);
  if (unstarted.length > 0 && (await handBackRunning(handBack, unstarted)) < unstarted.length) leftRunning = true;
  if (p.running.size > 0) {
    p.log.info({ running: p.running.size, graceMs }, 'waiting for running steps');
    await p.running.doneWithin(graceMs);
  }
  if (p.running.size > 0) {
    const ids = p.running.releaseAll(reason);
    if ((await handBackRunning(handBack, ids)) < ids.length) leftRunning = true;
    await p.running.allDone();
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.outcomes.idle(), new Promise((r) => (timer = setTimeout(r, Math.max(graceMs, 1_000))))]);
  clearTimeout(timer);
  if (p.outcomes.unrecorded > 0) {
    leftRunning = true;
    p.outcomes.abandon();
  }
  await p.outcomes.idle();
  if (leftRunning) await p.heartbeat.pause();
  else await p.heartbeat.stop();
  await p.listener.close();
  await p.pool.end();
}
