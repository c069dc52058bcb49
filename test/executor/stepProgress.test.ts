/** A step's progress sink: checks reports, writes through the fenced statement, nothing after close. */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/queries.js';
import { cleanProgress, stepProgressSink } from '../../src/executor/steps/stepProgress.js';

/** A pool that records the values of each statement it is given. */
function recordingPool() {
  const writes: unknown[][] = [];
  const pool: Queryable = {
    query: async <R>(config: { values?: unknown[] }) => {
      writes.push(config.values ?? []);
      return { rows: [{ written: true } as R], rowCount: 1 };
    },
  };
  return { pool, writes };
}

const step = { id: '42', workflow_id: '7', name: 'long' };
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('step progress sink', () => {
  it('writes a report through recordProgressIfRunning with the step, the executor and the event target', async () => {
    const { pool, writes } = recordingPool();
    const sink = stepProgressSink({ pool, executorId: 'ex-1', schema: 'stepd', emitEvents: true, log: pino({ level: 'silent' }) }, step);
    sink.report({ progress: 1, total: 4, message: 'one' });
    await sink.close();
    expect(writes).toEqual([['42', 'ex-1', JSON.stringify({ progress: 1, total: 4, message: 'one' }), 'stepd_events', 'stepd']]);
  });

  it('sends no event without events, drops invalid reports, and ignores reports after close', async () => {
    const { pool, writes } = recordingPool();
    const sink = stepProgressSink({ pool, executorId: 'ex-1', schema: 'stepd', emitEvents: false, log: pino({ level: 'silent' }) }, step);
    sink.report({ progress: Number.NaN });
    sink.report({ total: 3 } as never);
    await sink.close();
    sink.report({ progress: 2 });
    await flush();
    expect(writes).toEqual([]);
    const sink2 = stepProgressSink({ pool, executorId: 'ex-1', schema: 'stepd', emitEvents: false, log: pino({ level: 'silent' }) }, step);
    sink2.report({ progress: 2 });
    await sink2.close();
    expect(writes).toEqual([['42', 'ex-1', '{"progress":2}', 'stepd_events', null]]);
  });

  it('keeps a finite progress and total and cuts a long message', () => {
    expect(cleanProgress({ progress: 3, total: Infinity, message: '' })).toEqual({ progress: 3 });
    expect(cleanProgress({ progress: 3, total: 9, message: 'x'.repeat(600) })?.message).toBe(`${'x'.repeat(500)}…`);
    expect(cleanProgress(null)).toBeUndefined();
    expect(cleanProgress({ progress: '3' })).toBeUndefined();
  });
});
