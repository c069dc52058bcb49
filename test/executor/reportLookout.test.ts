import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ReportLookout } from '../../src/executor/claims/reportLookout.js';

describe('looking again for worker reports after claiming some', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('looks 10 ms after a claim that found reports, then backs off, and stops 500 ms after the last one that did', () => {
    let now = 0;
    let looks = 0;
    const lookout = new ReportLookout({ look: () => looks++, now: () => now });
    lookout.claimed([{ task_ended: null }]); // no report: nothing to look for
    vi.advanceTimersByTime(100);
    expect(looks).toBe(0);
    lookout.claimed([{ task_ended: 'finished' }]);
    vi.advanceTimersByTime(10);
    expect(looks).toBe(1);
    // Each look's claim (made at once) finds nothing more: the next look comes twice as late,
    // and none is scheduled once 500 ms have passed since the claim that found one.
    const at: number[] = [];
    lookout.claimed([]);
    for (now = 10; now < 2_000; now += 1) {
      const before = looks;
      vi.advanceTimersByTime(1);
      if (looks > before) {
        at.push(now + 1);
        lookout.claimed([]);
      }
    }
    expect(at).toEqual([30, 70, 150, 310, 630]);
    // A claim that finds a report starts over at 10 ms.
    lookout.claimed([{ task_ended: 'finished' }]);
    vi.advanceTimersByTime(10);
    expect(looks).toBe(7);
  });

  it('keeps one look pending at a time, and none after close', () => {
    let looks = 0;
    const lookout = new ReportLookout({ look: () => looks++, now: () => 0 });
    lookout.claimed([{ task_ended: 'failed' }]);
    lookout.claimed([{ task_ended: 'lost' }]);
    vi.advanceTimersByTime(10);
    expect(looks).toBe(1);
    lookout.claimed([{ task_ended: 'finished' }]);
    lookout.close();
    vi.advanceTimersByTime(100);
    expect(looks).toBe(1);
  });

  it('looks again after a claim that took a readied signal wait (its signal may have skipped its NOTIFY, sql/0036), not after other toolless steps', () => {
    let looks = 0;
    const lookout = new ReportLookout({ look: () => looks++, now: () => 0 });
    lookout.claimed([{ tool: null, args: null, task_ended: null }, { tool: 'core.noop', args: { signal: 'not a wait' }, task_ended: null }]);
    vi.advanceTimersByTime(100);
    expect(looks).toBe(0);
    lookout.claimed([{ tool: null, args: { signal: { names: ['payment'], key: 'o-1' } }, task_ended: null }]);
    vi.advanceTimersByTime(10);
    expect(looks).toBe(1);
    lookout.close();
  });
});
