import { describe, expect, it } from 'vitest';
import { BatchPace } from '../../src/executor/core/batchPace.js';
import { OutcomeLanes } from '../../src/executor/outcomes/outcomeLanes.js';

const entry = (lane: string, n: number, user = 'u') => ({ input: { lane, user, stepId: `${lane}${n}` } });
const ids = (es: { input: { stepId: string } }[]) => es.map((e) => e.input.stepId);

describe('outcome batches taken across roles', () => {
  it('takes the oldest of a single lane, in order, and leaves the rest', () => {
    const pending = [1, 2, 3, 4].map((n) => entry('a', n));
    expect(ids(new OutcomeLanes().take(pending, 3))).toEqual(['a1', 'a2', 'a3']);
    expect(ids(pending)).toEqual(['a4']);
  });

  it("takes another role's outcome into the next batch however many of one role arrived before it", () => {
    const pending = [...Array.from({ length: 400 }, (_, i) => entry('a', i)), entry('b', 0)];
    const batch = new OutcomeLanes().take(pending, 4);
    expect(ids(batch).sort()).toEqual(['a0', 'a1', 'a2', 'b0']);
    expect(pending).toHaveLength(397);
    expect(ids(pending).slice(0, 2)).toEqual(['a3', 'a4']);
  });

  it('lets the users of one role take turns within its share', () => {
    const pending = [...[0, 1, 2, 3].map((n) => entry('a', n, 'bulk')), entry('a', 9, 'someone'), entry('b', 0)];
    expect(ids(new OutcomeLanes().take(pending, 3)).sort()).toEqual(['a0', 'a9', 'b0']);
  });

  it('alternates the lanes even one outcome at a time: the least recently served goes first', () => {
    const lanes = new OutcomeLanes();
    const pending = [...[0, 1, 2].map((n) => entry('a', n)), entry('b', 0), entry('b', 1)];
    const firsts = [1, 2, 3, 4, 5].map(() => ids(lanes.take(pending, 1))[0]);
    expect(firsts).toEqual(['a0', 'b0', 'a1', 'b1', 'a2']);
  });
});

describe('batches paced to a target time', () => {
  it('stays whole while batches are quick, shrinks in proportion when one runs long, and doubles back', () => {
    const pace = new BatchPace(500, 100);
    expect(pace.size()).toBe(500);
    pace.recorded(500, 60); // cheap outcomes: whole batches
    expect(pace.size()).toBe(500);
    pace.recorded(400, 2_900); // heavy: 7 ms each
    expect(pace.size()).toBe(13);
    pace.recorded(13, 400); // heavier still
    expect(pace.size()).toBe(3);
    pace.recorded(1, 30); // not full: says nothing about a bigger batch
    expect(pace.size()).toBe(3);
    const sizes = [1, 2, 3, 4, 5, 6, 7, 8].map(() => (pace.recorded(pace.size(), 20), pace.size()));
    expect(sizes).toEqual([6, 12, 24, 48, 96, 192, 384, 500]);
  });
});

describe('outcome batches of one role', () => {
  it('let its users take turns when the batch cannot take every outcome', () => {
    const pending = [...[0, 1, 2, 3].map((n) => entry('a', n, 'bulk')), entry('a', 9, 'someone')];
    expect(ids(new OutcomeLanes().take(pending, 2)).sort()).toEqual(['a0', 'a9']);
  });
});
