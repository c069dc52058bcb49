/**
 * PostgreSQL goes away under a running daemon: `pg_ctl restart -m fast`, `-m immediate` (a
 * crash and recovery), or a 5 s outage (stop, wait, start), while one daemon at
 * `--concurrency 4` runs the mixed load. The daemon must stay alive, reconnect and finish
 * everything. Recovery: from the moment the server is back until the first step claimed after
 * that is done.
 */
import { sleep, Scenario, type Suite } from './harness.js';
import { measure, type Figures } from './measure.js';

export type RestartKind = 'fast' | 'immediate' | 'outage';

const SIZES = {
  reduced: { workflows: 100, seconds: 8, restarts: 1 },
  full: { workflows: 400, seconds: 30, restarts: 3 },
} as const;

async function restartOnce(s: Scenario, kind: RestartKind): Promise<number> {
  const cluster = s.suite.cluster;
  if (kind === 'outage') {
    await cluster.stop('fast');
    await sleep(5_000);
    await cluster.start();
  } else {
    await cluster.restart(kind);
  }
  return Date.now();
}

/** ms from `upAt` until a step claimed after it is done (reviving a daemon that died meanwhile). */
async function recoveryAfter(s: Scenario, upAt: number): Promise<number | undefined> {
  const deadline = upAt + 60_000;
  while (Date.now() < deadline) {
    await s.reviveDead();
    const [r] = await s.q<{ at: number | null }>(
      `SELECT (extract(epoch FROM min(completed_at)) * 1000)::float8 AS at FROM ${s.t.steps}
        WHERE status = 'done' AND started_at > to_timestamp($1::float8 / 1000)`,
      [upAt],
    );
    if (r?.at != null) return Math.max(0, r.at - upAt);
    await sleep(100);
  }
  return undefined;
}

export async function runPgRestart(suite: Suite, kind: RestartKind): Promise<Figures> {
  const name = kind === 'outage' ? 'pg-outage-5s' : `pg-restart-${kind}`;
  const size = SIZES[suite.size];
  const startedAt = Date.now();
  const s = new Scenario(suite, name, { concurrency: 4 });
  try {
    await s.setup();
    await s.startDaemon('r1');
    s.startApprover();
    const load = s.streamLoad(size.workflows, size.seconds * 1000);
    const recoveryMs: number[] = [];
    const failures: string[] = [];
    for (let i = 0; i < size.restarts; i++) {
      await sleep((size.seconds * 1000) / (size.restarts + 1));
      suite.progress(`${name}: ${kind === 'outage' ? 'stopping PostgreSQL for 5 s' : `pg_ctl restart -m ${kind}`} (${i + 1}/${size.restarts})`);
      const upAt = await restartOnce(s, kind);
      const ms = await recoveryAfter(s, upAt);
      if (ms === undefined) failures.push('no step was done within 60 s of the restart');
      else recoveryMs.push(ms);
    }
    await load;
    const settled = await s.settle(120_000);
    if (!settled) failures.push('workflows still running 120 s after the load ended');
    return await measure(s, { executors: 1, recoveryMs, failures, startedAt });
  } finally {
    await s.teardown();
  }
}
