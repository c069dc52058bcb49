/**
 * The admission lane on its own (its admissions are functions the test settles): how many run at
 * once, when the next starts, that a failure backs off instead of stopping anything, and that a
 * stop waits for the one in flight.
 */
import { describe, expect, it } from 'vitest';
import type { Admission } from '../../src/executor/admission/admission.js';
import { AdmissionLane, type AdmissionLaneDeps } from '../../src/executor/admission/admissionLane.js';

interface Pending {
  limit: number;
  settle: (r: Admission | Error) => void;
}

function lane(maxInFlight: number, over: Partial<AdmissionLaneDeps> = {}) {
  const calls: Pending[] = [];
  const seen = { admitted: 0, errors: 0, wakes: 0, wakeIns: [] as number[], startAtAsked: 0 };
  const l = new AdmissionLane({
    admitBatch: 10,
    maxInFlight,
    admit: (limit) =>
      new Promise<Admission>((resolve, reject) => calls.push({ limit, settle: (r) => (r instanceof Error ? reject(r) : resolve(r)) })),
    nextStartAtInMs: async () => {
      seen.startAtAsked++;
      return undefined;
    },
    onAdmitted: () => void seen.admitted++,
    onError: () => void seen.errors++,
    wake: () => void seen.wakes++,
    wakeIn: (ms) => void seen.wakeIns.push(ms),
    ...over,
  });
  return { l, calls, seen };
}

const admitted = (n: number): Admission => ({ admitted: n, claimed: [], readyNow: false });
const tick = () => new Promise((r) => setImmediate(r));

describe('the admission lane', () => {
  it('runs one admission at a time with maxInFlight 1, and starts the next after a full batch', async () => {
    const { l, calls, seen } = lane(1);
    expect(l.start(5, false)).toBe(10);
    expect(l.start(5, false)).toBe(0);
    expect(calls).toHaveLength(1);
    calls[0]!.settle(admitted(10));
    await tick();
    expect(l.running).toBe(0);
    expect(seen.wakes).toBeGreaterThan(0);
    expect(l.pending).toBe(true);
    expect(l.start(5, false)).toBe(10);
    calls[1]!.settle(admitted(3));
    await tick();
    // Not full: caught up, so it asks for the earliest delayed start. It was started in a
    // backlog, so one more look follows; after that the lane waits for a wake-up.
    expect(seen.startAtAsked).toBe(1);
    expect(l.start(5, false)).toBe(10);
    calls[2]!.settle(admitted(0));
    await tick();
    expect(l.pending).toBe(false);
    expect(l.start(5, false)).toBe(0);
  });

  it('a workflow deferred for a held lock is looked for again when its backoff ends (the alarm)', async () => {
    const { l, calls, seen } = lane(1);
    l.start(5, false);
    calls[0]!.settle({ ...admitted(0), deferredInMs: 30 });
    await tick();
    await tick();
    expect(l.pending).toBe(false);
    const wakes = seen.wakes;
    await new Promise((r) => setTimeout(r, 80));
    expect(l.pending).toBe(true);
    expect(seen.wakes).toBeGreaterThan(wakes);
    l.close();
  });

  it('in a backlog starts a second admission beside the first, never a third', async () => {
    const { l, calls } = lane(2);
    l.start(5, false);
    calls[0]!.settle(admitted(10));
    await tick();
    expect(l.start(5, false)).toBe(10);
    expect(l.start(5, false)).toBe(10);
    expect(l.start(5, false)).toBe(0);
    expect(l.running).toBe(2);
  });

  it('backs off after a failure: no admission starts before the backoff, and pending stays set', async () => {
    const { l, calls, seen } = lane(1);
    l.start(5, false);
    calls[0]!.settle(new Error('connection lost'));
    await tick();
    expect(seen.errors).toBe(1);
    expect(l.pending).toBe(true);
    expect(l.start(5, false)).toBe(0);
    expect(seen.wakeIns.length).toBe(1);
    expect(calls).toHaveLength(1);
  });

  it('waits while every slot is busy, then admits without claiming', async () => {
    const { l, calls, seen } = lane(1);
    expect(l.start(0, false)).toBe(0);
    expect(seen.wakeIns).toHaveLength(1);
    expect(calls).toHaveLength(0);
  });

  it('after close starts nothing, and idle() waits for the admission in flight', async () => {
    const { l, calls } = lane(1);
    l.start(5, false);
    l.close();
    expect(l.start(5, false)).toBe(0);
    let idle = false;
    const done = l.idle().then(() => (idle = true));
    await tick();
    expect(idle).toBe(false);
    calls[0]!.settle(admitted(1));
    await done;
    expect(idle).toBe(true);
  });
});
