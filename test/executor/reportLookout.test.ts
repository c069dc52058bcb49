import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ReportLookout } from '../../src/executor/reportLookout.js';

describe('looking again for worker reports after claiming some', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('looks every 10 ms while claims find reports, and stops 500 ms after the last one that did', () => {
    let now = 0;
    let looks = 0;
    const lookout = new ReportLookout({ look: () => looks++, now: () => now });
    lookout.claimed([{ task_ended: null }]); // no report: nothing to look for
    vi.advanceTimersByTime(100);
    expect(looks).toBe(0);
    lookout.claimed([{ task_ended: 'finished' }]);
    vi.advanceTimersByTime(10);
    expect(looks).toBe(1);
    // Each look's claim finds nothing more: looks go on until the linger is over.
    for (now = 10; now < 490; now += 10) {
      lookout.claimed([]);
      vi.advanceTimersByTime(10);
    }
    expect(looks).toBe(49);
    now = 500;
    lookout.claimed([]);
    vi.advanceTimersByTime(100);
    expect(looks).toBe(49);
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
});
