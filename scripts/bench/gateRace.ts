/**
 * Racing clients: `count` workflows wait at a gate; four clients each walk all of the gates in
 * the same order at `perSecond`, each readying every gate with its own autocommit
 * `UPDATE … SET status = 'ready' WHERE id = $1 AND status = 'pending'`. One of the four readies
 * each gate; the other three find it readied already (or wait a moment for the row lock of the
 * one that did) and change nothing: a burst of readyings mixed with three times as many no-op
 * UPDATEs, as services that retry or fan out approvals produce.
 *
 * Latency = the next step's started_at − the gate's readied_at (database clock); `gateStartedMs`
 * is up to the gate row itself running.
 */
import { performance } from 'node:perf_hooks';
import { MS_BETWEEN, pollUntil, sleep } from './pg.js';
import { summarize, type LatencySummary } from './stats.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface GateRaceResult {
  gates: number;
  clients: number;
  perSecond: number;
  latencyMs: LatencySummary;
  gateStartedMs: LatencySummary;
  noOpUpdates: number;
  timedOut: boolean;
}

export const RACE_FLOW = { start: 'gate', steps: { gate: { approval: true, next: 'after' }, after: { tool: 'core.noop', done: true } } };

const CLIENTS = 4;

export async function runGateRace(ctx: StepdContext, count: number, perSecond: number, name = 'bench-gate-race'): Promise<GateRaceResult> {
  const { steps } = tables(ctx.schema);
  const ids = await insertWorkflows(ctx, name, RACE_FLOW, count);
  const gates = await pollUntil(
    async () => {
      ctx.executor.assertAlive();
      const rows = await query<{ id: string }>(
        ctx,
        `SELECT id FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2 AND name = 'gate' AND status = 'pending' ORDER BY id`,
        [ids.first, ids.last],
      );
      return rows.length === count ? rows.map((r) => r.id) : undefined;
    },
    { what: `${count} pending gates`, intervalMs: 50, timeoutMs: ctx.timeoutMs },
  );

  let noOps = 0;
  const t0 = performance.now();
  const client = async () => {
    const c = await ctx.db.connect();
    try {
      for (let i = 0; i < gates.length; i++) {
        const wait = (i * 1000) / perSecond - (performance.now() - t0);
        if (wait > 1) await sleep(wait);
        const r = await c.query(`UPDATE ${steps} SET status = 'ready' WHERE id = $1 AND status = 'pending'`, [gates[i]]);
        if (r.rowCount === 0) noOps++;
      }
    } finally {
      c.release();
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, () => client()));
  const { timedOut } = await waitForWorkflows(ctx, name, 20);

  const rows = await query<{ after: number; gate: number }>(
    ctx,
    `SELECT ${MS_BETWEEN('g.readied_at', 'a.started_at')} AS after, ${MS_BETWEEN('g.readied_at', 'g.started_at')} AS gate
       FROM ${steps} g JOIN ${steps} a ON a.workflow_id = g.workflow_id AND a.name = 'after'
      WHERE g.workflow_id BETWEEN $1 AND $2 AND g.name = 'gate' AND g.readied_at IS NOT NULL AND a.started_at IS NOT NULL`,
    [ids.first, ids.last],
  );
  return {
    gates: rows.length,
    clients: CLIENTS,
    perSecond,
    latencyMs: summarize(rows.map((r) => r.after)),
    gateStartedMs: summarize(rows.map((r) => r.gate)),
    noOpUpdates: noOps,
    timedOut,
  };
}
