/** Progress throttling: one write per interval, never two at once, the last value always written, nothing after close. */
import { describe, expect, it } from 'vitest';
import { ProgressThrottle, type Schedule } from '../../src/executor/steps/progressThrottle.js';

/** A clock and a timer queue the test moves by hand. */
function manualTime() {
  let now = 0;
  let timers: { at: number; fn: () => void }[] = [];
  const schedule: Schedule = (fn, ms) => {
    const t = { at: now + ms, fn };
    timers.push(t);
    return () => {
      timers = timers.filter((x) => x !== t);
    };
  };
  return {
    now: () => now,
    schedule,
    pending: () => timers.length,
    /** Moves time forward, running the timers that come due. */
    async advance(ms: number) {
      now += ms;
      for (const t of timers.filter((x) => x.at <= now)) {
        timers = timers.filter((x) => x !== t);
        t.fn();
      }
      await flush();
    },
  };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A writer whose writes finish when the test says so. */
function gatedWriter() {
  const written: number[] = [];
  const open: (() => void)[] = [];
  return {
    written,
    inFlight: () => open.length,
    write: (v: number) =>
      new Promise<void>((resolve) => {
        written.push(v);
        open.push(resolve);
      }),
    async finishAll() {
      for (const f of open.splice(0)) f();
      await flush();
    },
  };
}

describe('progress throttle', () => {
  it('writes the first value at once and only the latest of a burst at the end of the interval', async () => {
    const time = manualTime();
    const w = gatedWriter();
    const t = new ProgressThrottle<number>({ intervalMs: 500, write: w.write, now: time.now, schedule: time.schedule });
    t.push(1);
    expect(w.written).toEqual([1]);
    await w.finishAll();
    for (let i = 2; i <= 100; i++) t.push(i);
    expect(w.written).toEqual([1]);
    await time.advance(499);
    expect(w.written).toEqual([1]);
    await time.advance(1);
    expect(w.written).toEqual([1, 100]);
    await w.finishAll();
    await time.advance(10_000);
    expect(w.written).toEqual([1, 100]);
    expect(time.pending()).toBe(0);
  });

  it('never starts a write while one is in flight, and writes the latest value once it has finished', async () => {
    const time = manualTime();
    const w = gatedWriter();
    const t = new ProgressThrottle<number>({ intervalMs: 100, write: w.write, now: time.now, schedule: time.schedule });
    t.push(1);
    t.push(2);
    t.push(3);
    await time.advance(1_000);
    expect(w.written).toEqual([1]);
    expect(w.inFlight()).toBe(1);
    await w.finishAll();
    expect(w.written).toEqual([1, 3]);
  });

  it('writes a value still waiting when closed, then nothing more', async () => {
    const time = manualTime();
    const w = gatedWriter();
    const t = new ProgressThrottle<number>({ intervalMs: 500, write: w.write, now: time.now, schedule: time.schedule });
    t.push(1);
    await w.finishAll();
    t.push(2);
    const closed = t.close();
    await flush();
    expect(w.written).toEqual([1, 2]);
    await w.finishAll();
    await closed;
    t.push(3);
    await time.advance(10_000);
    expect(w.written).toEqual([1, 2]);
    expect(time.pending()).toBe(0);
  });

  it('waits for a write in flight when closed, and writes nothing when no value is waiting', async () => {
    const time = manualTime();
    const w = gatedWriter();
    const t = new ProgressThrottle<number>({ intervalMs: 500, write: w.write, now: time.now, schedule: time.schedule });
    t.push(1);
    let closed = false;
    const closing = t.close().then(() => (closed = true));
    await flush();
    expect(closed).toBe(false);
    await w.finishAll();
    await closing;
    expect(w.written).toEqual([1]);
  });

  it('keeps going after a write fails', async () => {
    const time = manualTime();
    const written: number[] = [];
    const t = new ProgressThrottle<number>({
      intervalMs: 100,
      now: time.now,
      schedule: time.schedule,
      write: async (v) => {
        written.push(v);
        if (v === 1) throw new Error('database away');
      },
    });
    t.push(1);
    await flush();
    t.push(2);
    await time.advance(100);
    expect(written).toEqual([1, 2]);
  });
});
