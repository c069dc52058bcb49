/**
 * What the outcome queue says of outcomes it gives up on, against real failures (a database that
 * cannot be reached, a schema without the tables): a step this executor ran is the watchdog's to
 * retry; a readied signal wait (guard `signalled`) is not — it stays ready, and the next signal
 * pickup records it. Each is told it was not recorded; one its batch recorded as the queue was
 * abandoned is told it was, and not logged as left behind.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isConnectionError } from '../../src/db/connectionErrors.js';
import type { FinishInput } from '../../src/executor/core/txTypes.js';
import { createLogger } from '../../src/logger.js';
import { createTestSchema, TEST_DATABASE_URL, waitFor } from '../helpers/db.js';
import { outcomeLaneOn, txDepsOn } from '../helpers/outcomeLane.js';
import { readiedWaits } from '../helpers/readiedWaits.js';
import { freePort } from '../helpers/ports.js';

const WAIT: FinishInput = { stepId: '1', workflowId: '1', guard: 'signalled', outcome: { status: 'done', result: { name: 'payment' } } };
const STEP: FinishInput = { stepId: '2', workflowId: '2', guard: 'running', outcome: { status: 'done', result: {} } };

const WAITS_STOPPING = 'signal waits not recorded before stopping; they stay ready, and the next signal pickup (here or on another executor) records them';
const WAITS_FAILED = 'could not record signal waits; they stay ready, and the next signal pickup (here or on another executor) records them';

/** The JSON lines of a debug logger. */
function capturedLog() {
  const lines: { level: number; msg: string; stepIds?: string[]; err?: unknown }[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } as never });
  return { log, lines };
}

describe('OutcomeQueue, on outcomes it gives up on', () => {
  it('stopping while the database is unreachable: the watchdog retries the steps, the next pickup records the signal waits', async () => {
    const { log, lines } = capturedLog();
    const url = `postgres://postgres@127.0.0.1:${await freePort()}/test`;
    const lane = outcomeLaneOn(txDepsOn({ url, schema: 'stepd', executorId: 'unreachable', log }), { onFailure: isConnectionError });
    const settled = [lane.push(WAIT), lane.push(STEP)];
    await waitFor(() => lines.some((l) => l.msg === 'outcomes not recorded yet: database unreachable; retrying'), 'a retried batch');
    lane.abandon();
    expect(await Promise.all(settled)).toEqual([false, false]);
    // Added after the queue gave up: not recorded either, and said so the same way.
    const late = await lane.push({ ...WAIT, stepId: '3' });
    expect(late).toBe(false);
    const warned = lines.filter((l) => l.level === 40).map((l) => [l.msg, l.stepIds]);
    expect(warned).toEqual([
      ['outcomes not recorded before stopping; the watchdog will retry their steps', ['2']],
      [WAITS_STOPPING, ['1']],
      [WAITS_STOPPING, ['3']],
    ]);
  });

  it('stopping while a batch commits: its recorded outcomes are told so, and not logged as left behind', async () => {
    const t = await createTestSchema();
    await readiedWaits(t, 1);
    const [wait] = await t.q<{ id: string; workflow_id: string }>(`SELECT id::text, workflow_id::text FROM stepd.workflow_steps WHERE name = 'paid'`);
    const { log, lines } = capturedLog();
    // Abandoned once the batch has committed, before the drain looks at what is left.
    const lane: ReturnType<typeof outcomeLaneOn> = outcomeLaneOn(txDepsOn({ url: t.url, schema: t.schema, executorId: 'stopping', log }), { onRecorded: () => lane.abandon() });
    expect(await lane.push({ ...WAIT, stepId: wait!.id, workflowId: wait!.workflow_id })).toBe(true);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('recording failing past its attempts: the same split, logged as errors with the failure', async () => {
    const { log, lines } = capturedLog();
    // A schema with no tables: every statement fails (42P01), which is no lost connection.
    const schema = `missing_${randomBytes(4).toString('hex')}`;
    const lane = outcomeLaneOn(txDepsOn({ url: TEST_DATABASE_URL, schema, executorId: 'failing', log }), { onFailure: isConnectionError, maxAttempts: 1 });
    expect(await Promise.all([lane.push(WAIT), lane.push(STEP)])).toEqual([false, false]);
    const errors = lines.filter((l) => l.level === 50);
    expect(errors.map((l) => [l.msg, l.stepIds])).toEqual([
      ['could not record step outcomes; the watchdog will retry the steps', ['2']],
      [WAITS_FAILED, ['1']],
    ]);
    expect(errors.map((l) => (l.err as { code?: string }).code)).toEqual(['42P01', '42P01']);
  });
});
