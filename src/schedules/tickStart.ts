/**
 * One tick of a schedule, under its policies (docs/schedules.md, sql/0033), in one transaction on
 * an executor connection: the schedule's tick record is locked, so copies of one job on two
 * daemons, a retried job and the catch-up take turns. A tick starts only when it is later than the
 * last tick handled, and is then recorded, whatever happens to it:
 *
 *   paused            nothing starts (and the tick is not recorded: resuming catches up nothing
 *                     from before the resume, since the catch-up looks after the last write)
 *   overlap allow     the tick's workflow starts
 *   overlap skip      nothing starts while the previous tick's workflow is new or running
 *   cancel-previous   that workflow is cancelled (its live steps too), then the tick's starts
 */
import type pg from 'pg';
import { cancelWorkflowIfLive, insertTickWorkflowByKey, lockTickRecordForUpdate, recordTickIfLater } from '../db/queries/scheduleTicks.js';
import type { ScheduleRow } from '../db/queries/schedules.js';

export type TickOutcome =
  | { outcome: 'started'; workflowId: string; cancelled?: string }
  | { outcome: 'not-later' | 'paused' | 'key-taken' }
  | { outcome: 'skipped-overlap'; running: string };

const LIVE = new Set(['new', 'running']);

export async function startTickUnderPolicies(pool: pg.Pool, t: { schema: string; schedule: ScheduleRow; tick: Date }): Promise<TickOutcome> {
  const s = t.schedule;
  if (s.paused) return { outcome: 'paused' };
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const record = await lockTickRecordForUpdate(client, s.name, t.tick);
    let result: TickOutcome;
    if (record.not_later) {
      result = { outcome: 'not-later' };
    } else {
      const previousLive = record.last_workflow_id !== null && record.last_status !== null && LIVE.has(record.last_status) ? record.last_workflow_id : undefined;
      if (previousLive && s.overlap === 'skip') {
        result = { outcome: 'skipped-overlap', running: previousLive };
        await recordTickIfLater(client, s.name, t.tick, null);
      } else {
        const cancelled = previousLive && s.overlap === 'cancel-previous' && (await cancelWorkflowIfLive(client, previousLive)) ? previousLive : undefined;
        const id = await insertTickWorkflowByKey(client, t);
        await recordTickIfLater(client, s.name, t.tick, id ?? null);
        result = id ? { outcome: 'started', workflowId: id, ...(cancelled ? { cancelled } : {}) } : { outcome: 'key-taken' };
      }
    }
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
