import { describe, expect, it } from 'vitest';
import { Slots } from '../../src/executor/slots.js';

describe('an executor’s tool slots', () => {
  it('counts held and reserved slots against the concurrency, never below zero', () => {
    const slots = new Slots(4, () => 0);
    slots.hold();
    slots.reserve(2);
    expect(slots.free).toBe(1);
    slots.reserve(3);
    expect(slots.free).toBe(0);
    slots.unreserve(5);
    slots.release();
    expect(slots.free).toBe(4);
  });

  it('offers nothing while more outcomes wait to be recorded than the concurrency', () => {
    let queued = 5;
    const slots = new Slots(4, () => queued);
    expect(slots.free).toBe(0);
    queued = 4;
    expect(slots.free).toBe(4);
  });

  it('lets a transaction claim half the free slots on creation while ready steps wait', () => {
    const slots = new Slots(8, () => 0);
    expect(slots.forCreation()).toBe(8);
    expect(slots.forCreation(3)).toBe(3);
    slots.backlog = true;
    expect(slots.forCreation()).toBe(4);
  });

  it('gives a claim’s reservation back even when the claim fails', async () => {
    const slots = new Slots(4, () => 0);
    await expect(slots.reserving(3, async () => {
      expect(slots.free).toBe(1);
      throw new Error('boom');
    })).rejects.toThrow('boom');
    expect(slots.free).toBe(4);
  });
});
