/**
 * The TxWriter on its own (no database: a fake client answers the one INSERT): which steps a
 * transaction claims as it creates them, and that every slot it took is given back when a step
 * is dropped or the transaction rolls back.
 */
import { describe, expect, it } from 'vitest';
import type { NewStep, Queryable } from '../../src/db/queries.js';
import { createClaims, Slots } from '../../src/executor/claims/slots.js';
import { TxWriter } from '../../src/executor/core/txWriter.js';

/** Answers insertSteps with ascending ids; records nothing else. */
function fakeDb(): Queryable {
  let next = 1;
  return {
    query: async <R>(config: { values?: unknown[] }) => {
      // insertSteps sends its rows as one JSON array.
      const rows = config.values?.[0];
      const n = typeof rows === 'string' ? (JSON.parse(rows) as unknown[]).length : 0;
      return { rows: Array.from({ length: n }, () => ({ id: String(next++) })) as R[], rowCount: n };
    },
  };
}

const step = (tool: string | null, workflowId = '1'): NewStep => ({ workflowId, name: tool ?? 'gate', tool, args: null, status: 'ready', attempt: 1, readyInMs: 0, fanoutId: null, itemIndex: null });
const instant = (tool: string) => tool === 'core.noop';

describe('a transaction claiming the steps it creates', () => {
  it('claims a step of an instant tool without a slot, even when none is free', async () => {
    const slots = new Slots(1, () => 0);
    slots.hold();
    const claims = createClaims(slots, { executorId: 'x', maxSlots: Infinity, limited: () => false, instant });
    const w = new TxWriter(fakeDb(), 's', claims.handle);
    w.queue(step('core.noop'), { leaseMs: 1_000 });
    w.queue(step('probe.slow'), { leaseMs: 1_000 });
    await w.flush();
    expect(w.claimed.map((c) => [c.step.tool, c.slot])).toEqual([['core.noop', false]]);
    claims.settle();
    expect(slots.free).toBe(0);
  });

  it('takes a slot per claimed tool step, and gives it back for a step dropped or rolled back', async () => {
    const slots = new Slots(4, () => 0);
    const claims = createClaims(slots, { executorId: 'x', maxSlots: Infinity, limited: () => false, instant });
    const w = new TxWriter(fakeDb(), 's', claims.handle);
    w.queue(step('probe.slow', '1'), { leaseMs: 1_000 });
    w.queue(step('probe.slow', '2'), { leaseMs: 1_000 });
    w.queue(step('core.noop', '2'), { leaseMs: 1_000 });
    expect(slots.free).toBe(2);
    w.dropQueued('2');
    expect(slots.free).toBe(3);
    await w.flush();
    expect(w.claimed).toHaveLength(1);
    w.releaseClaims(); // the transaction rolled back after the insert
    expect(slots.free).toBe(4);
  });

  it('never claims a step a configured limit applies to, instant or not', async () => {
    const slots = new Slots(4, () => 0);
    const claims = createClaims(slots, { executorId: 'x', maxSlots: Infinity, limited: () => true, instant });
    const w = new TxWriter(fakeDb(), 's', claims.handle);
    w.queue(step('core.noop'), { leaseMs: 1_000 });
    w.queue(step('probe.slow'), { leaseMs: 1_000 });
    await w.flush();
    expect(w.claimed).toEqual([]);
    expect(slots.free).toBe(4);
  });
});
