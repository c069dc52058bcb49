/**
 * Signals scenario: `count` workflows each wait for a `payment` signal keyed by their own order;
 * once every wait is pending, signals are inserted at `perSecond` (each its own autocommit INSERT,
 * as a service would send them, spread over SENDERS connections of their own), one per workflow,
 * in random order. Each INSERT waits for its commit's WAL flush (several ms on a busy machine), so
 * a connection sends one signal per flush: four connections could not keep 1,000/s here (about
 * 460/s measured), and the harness, not stepd, set the pace. Sixteen keep it with room to spare.
 *
 * Latency = the next step's started_at − the signal's created_at, both on the database clock:
 * from the sender's commit (an upper bound: created_at is the INSERT's transaction time) to the
 * step after the wait running. `waitStartedMs` is the same up to the wait step itself running.
 * `sendLagMs` is how far behind its schedule the last signal went out (the harness's own pace).
 *
 * The latency splits at the sender's commit, as the sender saw it (its INSERT returned; the
 * harness's clock, which is the database's on this one machine): `commitMs` is the sender's own
 * transaction (begin → committed: the INSERT, its matching, the WAL flush it waits for), and
 * `afterCommitMs` is stepd's part (committed → the next step running). The two need not add up
 * to the whole: each is its own distribution, and the executor may see a commit before the
 * sender hears of it (a negative `afterCommitMs`).
 */
import { performance } from 'node:perf_hooks';
import { clientPool, MS_BETWEEN, pollUntil, sleep } from './pg.js';
import { summarize, type LatencySummary } from './stats.js';
import { insertWorkflows, query, tables, waitForWorkflows, type StepdContext } from './stepdScenario.js';

export interface SignalBurstResult {
  signals: number;
  perSecond: number;
  latencyMs: LatencySummary;
  waitStartedMs: LatencySummary;
  /** The rest of the way, p50s: wait claimed → recorded done, → next step created, → next step running. */
  afterWaitMs: { recorded: number; nextCreated: number; nextStarted: number };
  sendLagMs: number;
  /** The sender's own transaction, begin → committed as it saw it (p50, p99). */
  commitMs: { p50: number; p99: number };
  /** Committed (as the sender saw it) → the next step running (p50, p99): stepd's part. */
  afterCommitMs: { p50: number; p99: number };
  /** Signals sent ÷ seconds from the first due to the last committed: the pace the senders held. */
  sentPerSecond: number;
  timedOut: boolean;
}

export const SIGNAL_FLOW = {
  start: 'paid',
  steps: {
    paid: { signal: { name: 'payment', key: '{{input.order}}' }, next: 'ship' },
    ship: { tool: 'core.noop', done: true },
  },
};

const SENDERS = 16;

/** Inserts the workflows one statement each key: input.order = 'o-<n>'. */
async function insertWaiting(ctx: StepdContext, name: string, count: number): Promise<{ first: string; last: string }> {
  const { workflows } = tables(ctx.schema);
  const [r] = await query<{ first: string; last: string }>(
    ctx,
    `WITH ins AS (INSERT INTO ${workflows} (name, flow, input, created_by)
                  SELECT $1, $2::jsonb, jsonb_build_object('order', 'o-' || n), 'bench' FROM generate_series(1, $3::int) AS n RETURNING id)
     SELECT min(id)::text AS first, max(id)::text AS last FROM ins`,
    [name, JSON.stringify(SIGNAL_FLOW), count],
  );
  return r!;
}

export async function runSignalBurst(ctx: StepdContext, count: number, perSecond: number, name = 'bench-signals'): Promise<SignalBurstResult> {
  const { steps } = tables(ctx.schema);
  const ids = await insertWaiting(ctx, name, count);
  await pollUntil(
    async () => {
      ctx.executor.assertAlive();
      const [r] = await query<{ n: number }>(
        ctx,
        `SELECT count(*)::int AS n FROM ${steps} WHERE workflow_id BETWEEN $1 AND $2 AND name = 'paid' AND status = 'pending'`,
        [ids.first, ids.last],
      );
      return r!.n === count ? true : undefined;
    },
    { what: `${count} pending signal waits`, intervalMs: 50, timeoutMs: ctx.timeoutMs },
  );

  const keys = Array.from({ length: count }, (_, i) => `o-${i + 1}`);
  for (let i = keys.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [keys[i], keys[j]] = [keys[j]!, keys[i]!];
  }
  const signalsTable = `${ctx.schema}.signals`;
  const senders = clientPool(ctx.url, SENDERS);
  // Every connection open before the first signal is due: opening one is not part of sending.
  const opened = await Promise.all(Array.from({ length: SENDERS }, () => senders.connect()));
  for (const c of opened) c.release();
  const t0 = performance.now();
  let lag = 0;
  /** When each signal's INSERT returned to its sender (ms since the epoch), by key. */
  const committed = new Map<string, number>();
  const sender = async (offset: number) => {
    const client = await senders.connect();
    try {
      for (let i = offset; i < keys.length; i += SENDERS) {
        const due = (i * 1000) / perSecond;
        const wait = due - (performance.now() - t0);
        if (wait > 1) await sleep(wait);
        else lag = Math.max(lag, -wait);
        await client.query(`INSERT INTO ${signalsTable} (name, key, payload) VALUES ('payment', $1, '{}')`, [keys[i]]);
        committed.set(keys[i]!, Date.now());
      }
    } finally {
      client.release();
    }
  };
  try {
    await Promise.all(Array.from({ length: SENDERS }, (_, k) => sender(k)));
  } finally {
    await senders.end();
  }
  const sentPerSecond = keys.length / ((performance.now() - t0) / 1000);
  const { timedOut } = await waitForWorkflows(ctx, name, 20);

  const rows = await query<{ ship: number; wait: number; recorded: number; created: number; started: number; key: string; sent_at: number; ship_at: number }>(
    ctx,
    `SELECT sg.key, (extract(epoch FROM sg.created_at) * 1000)::float8 AS sent_at, (extract(epoch FROM ship.started_at) * 1000)::float8 AS ship_at,
            ${MS_BETWEEN('sg.created_at', 'ship.started_at')} AS ship, ${MS_BETWEEN('sg.created_at', 'paid.started_at')} AS wait,
            ${MS_BETWEEN('paid.started_at', 'paid.completed_at')} AS recorded, ${MS_BETWEEN('paid.completed_at', 'ship.created_at')} AS created,
            ${MS_BETWEEN('ship.created_at', 'ship.started_at')} AS started
       FROM ${steps} paid
       JOIN ${steps} ship ON ship.workflow_id = paid.workflow_id AND ship.name = 'ship'
       JOIN ${signalsTable} sg ON sg.id = (paid.result ->> 'id')::bigint
      WHERE paid.workflow_id BETWEEN $1 AND $2 AND paid.name = 'paid' AND paid.status = 'done' AND ship.started_at IS NOT NULL`,
    [ids.first, ids.last],
  );
  const split = rows.flatMap((r) => {
    const at = committed.get(r.key);
    return at === undefined ? [] : [{ commit: at - r.sent_at, after: r.ship_at - at }];
  });
  const commit = summarize(split.map((x) => x.commit));
  const after = summarize(split.map((x) => x.after));
  return {
    signals: rows.length,
    perSecond,
    latencyMs: summarize(rows.map((r) => r.ship)),
    waitStartedMs: summarize(rows.map((r) => r.wait)),
    afterWaitMs: {
      recorded: summarize(rows.map((r) => r.recorded)).p50,
      nextCreated: summarize(rows.map((r) => r.created)).p50,
      nextStarted: summarize(rows.map((r) => r.started)).p50,
    },
    sendLagMs: lag,
    commitMs: { p50: commit.p50, p99: commit.p99 },
    afterCommitMs: { p50: after.p50, p99: after.p99 },
    sentPerSecond,
    timedOut,
  };
}
