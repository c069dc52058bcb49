import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeferredSignalRetry } from '../../src/executor/wakeups/deferredSignalRetry.js';

/** A retry whose tries are recorded at the fake clock's time and ready what `readies` says. */
function recorder(readies: (n: number) => number) {
  const at: number[] = [];
  const retry = new DeferredSignalRetry({
    retry: async () => {
      at.push(Date.now());
      return readies(at.length);
    },
    onError: () => {},
  });
  return { at, retry };
}

describe('trying deferred signal matches soon after a signal deferred one', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(0);
  });
  afterEach(() => void vi.useRealTimers());

  it('tries 20 ms after the hint, then 4× later after each try that readied nothing, and gives up past 1.5 s (the sweep is the backstop)', async () => {
    const { at, retry } = recorder(() => 0);
    retry.hinted();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(at).toEqual([20, 100, 420, 1_700]);
  });

  it('starts over at 20 ms after a try that readied something, and a hint while one is pending adds none', async () => {
    const { at, retry } = recorder((n) => (n === 2 ? 1 : 0));
    retry.hinted();
    retry.hinted();
    retry.hinted();
    await vi.advanceTimersByTimeAsync(5_000);
    // 20 (nothing), 100 (readied one), 120, 200, 520, 1,800.
    expect(at).toEqual([20, 100, 120, 200, 520, 1_800]);
  });

  it('a hint during a try brings the next one forward to 20 ms', async () => {
    let release: () => void = () => {};
    const at: number[] = [];
    const retry = new DeferredSignalRetry({
      retry: () => {
        at.push(Date.now());
        return at.length === 1 ? new Promise<number>((r) => (release = () => r(0))) : Promise.resolve(0);
      },
      onError: () => {},
    });
    retry.hinted();
    await vi.advanceTimersByTimeAsync(20);
    retry.hinted(); // the first try is in progress
    await vi.advanceTimersByTimeAsync(30);
    release();
    await vi.advanceTimersByTimeAsync(30);
    expect(at).toEqual([20, 70]);
  });

  it('a failed try is reported and backed off like an empty one; close stops it and waits for the try in progress', async () => {
    const errors: unknown[] = [];
    let tries = 0;
    const retry = new DeferredSignalRetry({
      retry: async () => {
        tries++;
        throw new Error('down');
      },
      onError: (err) => errors.push(err),
    });
    retry.hinted();
    await vi.advanceTimersByTimeAsync(150);
    expect(tries).toBe(2);
    expect(errors).toHaveLength(2);
    await retry.close();
    retry.hinted();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(tries).toBe(2);
  });
});
