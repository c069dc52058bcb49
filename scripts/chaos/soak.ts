/**
 * SIGKILL soak: two daemons run the mixed load while the harness kills one of them with
 * SIGKILL every few seconds and starts its replacement — with the same executor id (a restart
 * in place: it recovers its own orphans at start-up) or with a new id (a new pod: its orphans
 * must be rescued by the others, within 15 s by the heartbeat whatever the step's timeout).
 * Orphans: the steps the killed daemon had running; the figure is the time from the kill until
 * each one started again.
 */
import { sleep, Scenario, type Suite } from './harness.js';
import { measure, type Figures } from './measure.js';

const SIZES = {
  reduced: { workflows: 250, seconds: 24, kills: 4 },
  full: { workflows: 1000, seconds: 90, kills: 15 },
} as const;

/** Long enough for leases (60 s step timeout + 30 s grace) to expire if nothing faster rescues orphans. */
const SETTLE_MS = 150_000;

export async function runSoak(suite: Suite, ids: 'same' | 'new'): Promise<Figures> {
  const name = `soak-${ids}-ids`;
  const size = SIZES[suite.size];
  const startedAt = Date.now();
  const s = new Scenario(suite, name, { concurrency: 4 });
  try {
    await s.setup();
    const live = ['a', 'b'];
    for (const id of live) await s.startDaemon(id);
    s.startApprover();
    const load = s.streamLoad(size.workflows, size.seconds * 1000, 40);
    for (let k = 0; k < size.kills; k++) {
      await sleep((size.seconds * 1000) / (size.kills + 1));
      await s.reviveDead();
      const slot = k % live.length;
      const victim = live[slot]!;
      const rec = await s.kill(victim);
      const next = ids === 'same' ? victim : `${victim.charAt(0)}${k + 2}`;
      live[slot] = next;
      suite.progress(`${name}: killed ${victim} (${rec.orphans.length} running), starting ${next} (${k + 1}/${size.kills})`);
      await s.startDaemon(next);
    }
    await load;
    const failures: string[] = [];
    if (!(await s.settle(SETTLE_MS))) failures.push(`workflows still running ${SETTLE_MS / 1000} s after the load ended`);
    return await measure(s, { executors: 2, failures, startedAt, extra: [`kills ${s.kills.length}`] });
  } finally {
    await s.teardown();
  }
}
