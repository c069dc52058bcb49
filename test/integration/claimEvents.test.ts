/**
 * step.started comes from the claim statement itself (sql/0016): each claimed step is announced
 * exactly once — by the statement for this executor's sessions, by the per-row trigger for any
 * other session that claims (an executor of an earlier version) — and with events off, not at all.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { claimReadySteps } from '../../src/db/queries.js';
import { EVENTS_CHANNEL, parseEvent, type StepdEvent } from '../../src/events.js';
import { createTestSchema, insertWorkflow, onCleanup, waitFor, type TestSchema } from '../helpers/db.js';

async function listen(t: TestSchema): Promise<StepdEvent[]> {
  const events: StepdEvent[] = [];
  const client = new pg.Client({ connectionString: t.url });
  await client.connect();
  onCleanup(() => client.end());
  client.on('notification', (n) => {
    const e = n.payload ? parseEvent(n.payload) : undefined;
    if (e && e.schema === t.schema) events.push(e);
  });
  await client.query(`LISTEN ${EVENTS_CHANNEL}`);
  return events;
}

/** Three ready steps of running one-step workflows, written as the executor would. */
async function readySteps(t: TestSchema): Promise<void> {
  for (let i = 0; i < 3; i++) {
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo' } } });
    const session = await t.db.connect();
    try {
      await session.query(`SET stepd.executor = 'on'`);
      await session.query(`UPDATE ${t.schema}.workflows SET status = 'running', started_at = now() WHERE id = $1`, [id]);
      await session.query(`INSERT INTO ${t.schema}.workflow_steps (workflow_id, name, tool, status, ready_at) VALUES ($1, 'a', 'core.echo', 'ready', now())`, [id]);
    } finally {
      await session.query(`RESET stepd.executor`);
      session.release();
    }
  }
}

const started = (events: StepdEvent[]) => events.filter((e) => e.type === 'step.started').map((e) => (e as { stepId: string }).stepId).sort();

describe('step.started on a claim', () => {
  it("is announced once per step by the executor's claim statement (the trigger stays silent for it)", async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await readySteps(t);
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
    onCleanup(() => pool.end());
    const rows = await claimReadySteps(pool, { executorId: 'e', limit: 10, leaseMs: 60_000, startedSchema: t.schema });
    expect(rows).toHaveLength(3);
    await waitFor(() => started(events).length >= 3, 'three step.started events');
    await new Promise((r) => setTimeout(r, 100)); // a duplicate would arrive in the same commit
    expect(started(events)).toEqual(rows.map((r) => r.id).sort());
  });

  it('is announced by the trigger for a session that does not announce its claims itself', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await readySteps(t);
    const older = new pg.Client({ connectionString: t.url, options: `-c search_path=${t.schema},public -c stepd.executor=on` });
    await older.connect();
    onCleanup(() => older.end());
    const { rows } = await older.query<{ id: string }>(
      `UPDATE workflow_steps SET status = 'running', started_at = now(), executor_id = 'old', lease_until = now() + interval '1 minute'
        WHERE status = 'ready' RETURNING id`,
    );
    expect(rows).toHaveLength(3);
    await waitFor(() => started(events).length >= 3, 'three step.started events');
    expect(started(events)).toEqual(rows.map((r) => String(r.id)).sort());
  });

  it('is not announced when the claim carries no schema (events off)', async () => {
    const t = await createTestSchema();
    const events = await listen(t);
    await readySteps(t);
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1, events: false });
    onCleanup(() => pool.end());
    expect(await claimReadySteps(pool, { executorId: 'e', limit: 10, leaseMs: 60_000, startedSchema: null })).toHaveLength(3);
    // A marker event after the claim: once it arrives, a step.started would have too.
    await t.q(`SELECT pg_notify('${EVENTS_CHANNEL}', json_build_object('type', 'workflow.cancelled', 'schema', $1::text, 'workflowId', '0', 'at', now())::text)`, [t.schema]);
    await waitFor(() => events.length > 0, 'the marker event');
    expect(started(events)).toEqual([]);
  });
});
