/**
 * RunningTasks with prefetched steps: a step waiting for a slot runs when one frees, and one
 * handed back (or cancelled) while waiting never runs, and passes its slot on.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { RunningTasks } from '../../src/executor/claims/runningTasks.js';
import { Slots } from '../../src/executor/claims/slots.js';

function gate(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

describe('prefetched tasks', () => {
  it('run in order as slots free, never more at once than the concurrency', async () => {
    const slots = new Slots(1, () => 0, 1, 2);
    const tasks = new RunningTasks({ log: silentLogger(), slots, onEnded: () => {} });
    const ran: string[] = [];
    const first = gate();
    tasks.start('1', 'w', true, async () => {
      ran.push('1');
      await first.promise;
    });
    tasks.start('2', 'w', true, async () => void ran.push('2'));
    tasks.start('3', 'w', true, async () => void ran.push('3'));
    await Promise.resolve();
    expect(ran).toEqual(['1']);
    first.open();
    await tasks.allDone();
    await tasks.allDone();
    expect(ran).toEqual(['1', '2', '3']);
    expect(slots.free).toBe(1);
  });

  it('never runs a step handed back while it waited, and passes its slot on', async () => {
    const slots = new Slots(1, () => 0, 1, 2);
    const tasks = new RunningTasks({ log: silentLogger(), slots, onEnded: () => {} });
    const ran: string[] = [];
    const first = gate();
    tasks.start('1', 'w', true, async () => {
      ran.push('1');
      await first.promise;
    });
    tasks.start('2', 'w', true, async () => void ran.push('2'));
    tasks.start('3', 'w', true, async () => void ran.push('3'));
    expect(tasks.releaseWaiting(new Error('stopping')).sort()).toEqual(['2', '3']);
    first.open();
    await tasks.allDone();
    await new Promise((r) => setImmediate(r));
    expect(ran).toEqual(['1']);
    expect(tasks.size).toBe(0);
    expect(slots.free).toBe(1);
  });
});
