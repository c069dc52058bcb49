/**
 * A burst: 40 (full: 80) fan-out workflows, a forEach of 8 side effects each, inserted in one
 * statement while two daemons (`--concurrency 8`) are idle. Both should get work; the line
 * reports each executor's share of the steps done and how long the burst took.
 */
import { inputFor, flowFor } from './load.js';
import { Scenario, type Suite } from './harness.js';
import { measure, shareOf, type Figures } from './measure.js';

const SIZES = { reduced: { workflows: 40, items: 8 }, full: { workflows: 80, items: 8 } } as const;

export async function runBurst(suite: Suite): Promise<Figures> {
  const size = SIZES[suite.size];
  const startedAt = Date.now();
  const s = new Scenario(suite, 'burst', { concurrency: 8 });
  try {
    await s.setup();
    const ids = ['b1', 'b2'];
    await Promise.all(ids.map((id) => s.startDaemon(id)));
    const flow = JSON.stringify(flowFor('foreach', s.targets));
    const input = JSON.stringify({ ...inputFor('foreach'), items: Array.from({ length: size.items }, (_, i) => i) });
    const t0 = Date.now();
    await s.q(
      `INSERT INTO ${s.t.workflows} (name, flow, input, created_by) SELECT 'foreach', $1::jsonb, $2::jsonb, 'chaos' FROM generate_series(1, $3::int)`,
      [flow, input, size.workflows],
    );
    const failures: string[] = [];
    if (!(await s.settle(120_000))) failures.push('burst still running after 120 s');
    const took = `burst ${size.workflows}×${size.items} in ${((Date.now() - t0) / 1000).toFixed(1)} s`;
    return await measure(s, { executors: 2, failures, startedAt, extra: [await shareOf(s, ids), took] });
  } finally {
    await s.teardown();
  }
}
