import { describe, expect, it } from 'vitest';
import { createClaims, Slots } from '../../src/executor/claims/slots.js';

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

describe('claiming the steps a transaction creates', () => {
  const unlimited = () => false;

  it('reserves a slot only when a step takes it, and gives back what was not started', () => {
    const slots = new Slots(4, () => 0);
    const claims = createClaims(slots, { executorId: 'x', maxSlots: Infinity, limited: unlimited });
    expect(slots.free).toBe(4); // a transaction that creates nothing holds nothing
    expect(claims.handle.takeSlot()).toBe(true);
    expect(claims.handle.takeSlot()).toBe(true);
    expect(slots.free).toBe(2);
    claims.handle.giveSlot(); // a step dropped in the transaction
    slots.hold(); // the other one started
    claims.settle();
    expect(slots.free).toBe(3);
  });

  it('takes no more than its share, nor a slot another claim reserved meanwhile', () => {
    const slots = new Slots(4, () => 0);
    const capped = createClaims(slots, { executorId: 'x', maxSlots: 1, limited: unlimited });
    expect(capped.handle.takeSlot()).toBe(true);
    expect(capped.handle.takeSlot()).toBe(false);
    capped.settle();
    const claims = createClaims(slots, { executorId: 'x', maxSlots: Infinity, limited: unlimited });
    slots.reserve(4); // a claim statement in flight
    expect(claims.handle.takeSlot()).toBe(false);
  });

  it('leaves steps a configured limit applies to for the claim', () => {
    const claims = createClaims(new Slots(4, () => 0), { executorId: 'x', maxSlots: Infinity, limited: (tool) => tool === 'llm.ask' });
    expect(claims.handle.acquire('llm.ask', 'u')).toBeNull();
    expect(claims.handle.acquire('core.echo', 'u')).toBeTypeOf('function');
  });
});

describe('prefetched steps', () => {
  it('lets a claim take the free slots and the prefetch room, never more', () => {
    const slots = new Slots(2, () => 0, 2, 1);
    expect(slots.claimable).toBe(3);
    expect(slots.holdOrWait()).toBeUndefined();
    expect(slots.holdOrWait()).toBeUndefined();
    expect(slots.free).toBe(0);
    expect(slots.claimable).toBe(1);
    const waiting = slots.holdOrWait();
    expect(waiting).toBeInstanceOf(Promise);
    expect(slots.claimable).toBe(0);
  });

  it('hands a slot that frees to the oldest waiting step, so calls in flight never exceed the concurrency', async () => {
    const slots = new Slots(1, () => 0, 1, 2);
    expect(slots.holdOrWait()).toBeUndefined();
    const order: string[] = [];
    void slots.holdOrWait()!.then(() => order.push('first'));
    void slots.holdOrWait()!.then(() => order.push('second'));
    slots.release();
    await Promise.resolve();
    expect(order).toEqual(['first']);
    expect(slots.free).toBe(0);
    slots.release();
    await Promise.resolve();
    expect(order).toEqual(['first', 'second']);
    slots.release();
    expect(slots.free).toBe(1);
  });
});

describe('steps of a fair claim', () => {
  it('take the next free slots before the steps prefetched earlier, in their own order', async () => {
    const slots = new Slots(1, () => 0, 1, 4);
    expect(slots.holdOrWait()).toBeUndefined();
    const order: string[] = [];
    void slots.holdOrWait()!.then(() => order.push('prefetched'));
    void slots.holdOrWait(true)!.then(() => order.push('fair 1'));
    void slots.holdOrWait(true)!.then(() => order.push('fair 2'));
    for (let i = 0; i < 3; i++) {
      slots.release();
      await Promise.resolve();
    }
    expect(order).toEqual(['fair 1', 'fair 2', 'prefetched']);
  });
});
