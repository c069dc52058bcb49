/**
 * A readied row that the claim skipped because a client held a lock on it at that moment (the
 * claim takes rows FOR UPDATE SKIP LOCKED) is looked for again soon, not left for the poll.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitForStep, waitForWorkflow } from '../helpers/db.js';

describe('a readied gate locked by a client when its wake-up arrives', () => {
  it('starts once the lock is gone, long before the next poll', async () => {
    const t = await createTestSchema();
    // A poll far beyond the wait below: only a second look after the skipped claim can start the gate in time.
    await startExecutor(t, { pollIntervalMs: 120_000 });
    const id = await insertWorkflow(t, { start: 'gate', steps: { gate: { approval: true, next: 'after' }, after: { tool: 'core.echo', args: { ok: true } } } });
    const gate = await waitForStep(t, id, 'gate', 'pending');
    const holder = await t.db.connect();
    try {
      // FOR KEY SHARE lets the readying UPDATE through but makes the claim's FOR UPDATE SKIP LOCKED skip the row.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${t.schema}.workflow_steps WHERE id = $1 FOR KEY SHARE`, [gate.id]);
      await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
      // Long enough for the wake-up to arrive and its claim to skip the row.
      await new Promise((r) => setTimeout(r, 300));
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });
});
