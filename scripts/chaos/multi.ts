/**
 * Several daemons on one database (2 or 3, `--concurrency 8` each) share the mixed load under a
 * config limit of 6 tool calls at once (`limits.tools["*"]`), which must hold over all of them.
 * Reports each executor's share of the steps done.
 */
import { Scenario, type Suite } from './harness.js';
import { measure, shareOf, type Figures } from './measure.js';

const SIZES = {
  reduced: { workflows: 150, seconds: 10 },
  full: { workflows: 600, seconds: 30 },
} as const;

export async function runMulti(suite: Suite, executors: number): Promise<Figures> {
  const size = SIZES[suite.size];
  const startedAt = Date.now();
  const s = new Scenario(suite, `executors-${executors}`, { concurrency: 8, toolLimit: 6 });
  try {
    await s.setup();
    const ids = Array.from({ length: executors }, (_, i) => `e${i + 1}`);
    await Promise.all(ids.map((id) => s.startDaemon(id)));
    s.startApprover();
    await s.streamLoad(size.workflows, size.seconds * 1000);
    const failures: string[] = [];
    if (!(await s.settle(120_000))) failures.push('workflows still running 120 s after the load ended');
    return await measure(s, { executors, failures, startedAt, extra: [await shareOf(s, ids)] });
  } finally {
    await s.teardown();
  }
}
