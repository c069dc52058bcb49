/**
 * Scenario 4, wake-up: N workflows whose start step is a gate. Once all gates are pending,
 * they are readied one at a time, from another connection, each by a single-statement
 * autocommit `UPDATE … SET status = 'ready'`; the next one only after the previous workflow
 * has finished and the executor has been idle for a moment (10–20 ms).
 *
 * Latency = the gate row's started_at − readied_at, both on the database clock. readied_at is
 * the readying UPDATE's transaction time, so this is an upper bound of "commit → running": it
 * includes that UPDATE's own execution and commit (its round trip from the harness is reported
 * beside it as `updateRoundTripMs`).
 */
import { performance } from 'node:perf_hooks';
import { MS_BETWEEN, pollUntil, sleep, TimeoutError } from './pg.js';
import { summarize, type LatencySummary } from './stats.js';
import { insertWorkflows, query, tables, type StepdContext } from './stepdScenario.js';

export interface WakeupResult {
  gates: number;
  latencyMs: LatencySummary;
  updateRoundTripMs: LatencySummary;
  timedOut: boolean;
}

export const GATE_FLOW = { start: 'gate', steps: { gate: { approval: true, done: true } } };

export async function runWakeup(ctx: StepdContext, count: number, name = 'bench-wakeup'): Promise<WakeupResult> {
  const { workflows, steps } = tables(ctx.schema);
  const ids = await insertWorkflows(ctx, name, GATE_FLOW, count);
  const gates = await pollUntil(
    async () => {
      ctx.executor.assertAlive();
      const rows = await query<{ id: string; workflow_id: string }>(
        ctx,
        `SELECT id, workflow_id FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2 AND name = 'gate' AND status = 'pending' ORDER BY id`,
        [ids.first, ids.last],
      );
      return rows.length === count ? rows : undefined;
    },
    { what: `${count} pending gates`, intervalMs: 20, timeoutMs: ctx.timeoutMs },
  );

  // The readying connection is a separate one from the pool used for polling.
  const readier = await ctx.db.connect();
  const roundTrips: number[] = [];
  const deadline = Date.now() + ctx.timeoutMs;
  let timedOut = false;
  try {
    for (const gate of gates) {
      await sleep(10 + Math.random() * 10);
      const t0 = performance.now();
      await readier.query(`UPDATE ${steps} SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gate.id]);
      roundTrips.push(performance.now() - t0);
      await pollUntil(
        async () => {
          ctx.executor.assertAlive();
          const [w] = await query<{ status: string }>(ctx, `SELECT status FROM ${workflows} WHERE id = $1`, [gate.workflow_id]);
          return w!.status !== 'running' && w!.status !== 'new';
        },
        { what: `gate ${gate.id} to finish`, intervalMs: 2, timeoutMs: Math.max(1, deadline - Date.now()) },
      );
    }
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    timedOut = true;
  } finally {
    readier.release();
  }
  await query(ctx, `UPDATE ${workflows} SET status = 'cancelled' WHERE name = $1 AND status IN ('new', 'running')`, [name]);

  const rows = await query<{ ms: number }>(
    ctx,
    `SELECT ${MS_BETWEEN('readied_at', 'started_at')} AS ms FROM ${steps}
      WHERE workflow_id BETWEEN $1 AND $2 AND name = 'gate' AND started_at IS NOT NULL AND readied_at IS NOT NULL`,
    [ids.first, ids.last],
  );
  return { gates: rows.length, latencyMs: summarize(rows.map((r) => r.ms)), updateRoundTripMs: summarize(roundTrips), timedOut };
}
