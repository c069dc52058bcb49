/**
 * SignalPickup against the real database, with the outcome lane replaced by a recorder the test
 * controls: a wait is handed over once while on its way, a wait handed back unrecorded rests
 * before it is handed again (it never spins), and `room` bounds each look.
 */
import { describe, expect, it } from 'vitest';
import { PICKUP_BATCH, RESTING_MS, SignalPickup } from '../../src/executor/claims/signalPickup.js';
import type { FinishInput, Outcome } from '../../src/executor/core/txTypes.js';
import type { ReadiedSignalWait } from '../../src/db/queries.js';
import { asExecutor, createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, type TestSchema } from '../helpers/db.js';
import { outcomeLaneOn, txDepsOn } from '../helpers/outcomeLane.js';
import { PAID, readiedWaits } from '../helpers/readiedWaits.js';

/**
 * A pickup whose lane only remembers what it was given; `release(id)` lets go of one unrecorded,
 * `release(id, true)` settles it as recorded. `reported`: the waits told to onRecorded.
 */
async function pickupOn(t: TestSchema) {
  const db = await t.db.connect();
  onCleanup(async () => db.release());
  await db.query(`SET search_path TO ${t.schema.replace(/[^a-z0-9_]/g, '')}`);
  let now = 1_000_000;
  const given: FinishInput[] = [];
  const releases = new Map<string, (recorded: boolean) => void>();
  const reported: { wait: ReadiedSignalWait; outcome: Outcome }[] = [];
  const pickup = new SignalPickup({
    db,
    record: (input, settled) => {
      given.push(input);
      releases.set(input.stepId, settled);
    },
    onRecorded: (wait, outcome) => reported.push({ wait, outcome }),
    now: () => now,
  });
  const release = (id: string, recorded = false) => releases.get(id)!(recorded);
  return { pickup, given, reported, release, advance: (ms: number) => (now += ms) };
}

describe('SignalPickup', () => {
  it('hands each readied wait to the lane once while it is on its way, with the signal as its outcome', async () => {
    const t = await createTestSchema();
    await readiedWaits(t, 3);
    const p = await pickupOn(t);
    expect(await p.pickup.pickUp(10)).toEqual({ picked: 3, more: false });
    expect(p.given.map((g) => g.guard)).toEqual(['signalled', 'signalled', 'signalled']);
    expect(p.given.map((g) => g.outcome)).toEqual(p.given.map(() => expect.objectContaining({ status: 'done', result: expect.objectContaining({ name: 'payment' }) })));
    expect(p.given.map((g) => (g.outcome as { result: { key: string } }).result.key).sort()).toEqual(['o-0', 'o-1', 'o-2']);
    expect(p.pickup.inFlight).toBe(3);
    // Still ready in the database (nothing recorded them), but on their way: not handed again.
    expect(await p.pickup.pickUp(10)).toEqual({ picked: 0, more: false });
    expect(p.given).toHaveLength(3);
  });

  it('rests a wait the lane let go of without recording it, then hands it again', async () => {
    const t = await createTestSchema();
    await readiedWaits(t, 1);
    const p = await pickupOn(t);
    expect((await p.pickup.pickUp(10)).picked).toBe(1);
    const id = p.given[0]!.stepId;
    p.release(id);
    expect(p.pickup.inFlight).toBe(0);
    expect((await p.pickup.pickUp(10)).picked).toBe(0);
    p.advance(RESTING_MS / 2);
    expect((await p.pickup.pickUp(10)).picked).toBe(0);
    p.advance(RESTING_MS);
    expect((await p.pickup.pickUp(10)).picked).toBe(1);
    expect(p.given.map((g) => g.stepId)).toEqual([id, id]);
    // Let go of unrecorded: nothing to report (no metrics, span or log line for it).
    expect(p.reported).toEqual([]);
  });

  it('tells onRecorded of each wait the lane recorded, with its name, attempt and outcome, and of no other', async () => {
    const t = await createTestSchema();
    await readiedWaits(t, 2);
    const p = await pickupOn(t);
    expect((await p.pickup.pickUp(10)).picked).toBe(2);
    const [first, second] = p.given;
    // The lane recorded the first; the second was recorded by another executor first (or given up on).
    p.release(first!.stepId, true);
    p.release(second!.stepId, false);
    expect(p.reported).toEqual([{ wait: expect.objectContaining({ id: first!.stepId, workflow_id: first!.workflowId, name: 'paid', attempt: 1 }), outcome: first!.outcome }]);
    expect(p.pickup.inFlight).toBe(0);
  });

  it('over real outcome lanes: reports a wait its own lane recorded, not one another executor recorded first', async () => {
    const t = await createTestSchema();
    await readiedWaits(t, 1);
    const [txA, txB] = ['lane-a', 'lane-b'].map((executorId) => txDepsOn({ url: t.url, schema: t.schema, executorId }));
    const [laneA, laneB] = [outcomeLaneOn(txA!), outcomeLaneOn(txB!)];
    const reported: Record<string, string[]> = { a: [], b: [] };
    // B saw the wait first, but its lane records it only after A's did: B's guard finds it done.
    const heldByB: (() => void)[] = [];
    const b = new SignalPickup({ db: txB!.pool, record: (input, settled) => heldByB.push(() => laneB.add(input, settled)), onRecorded: (w) => reported.b!.push(w.id) });
    const a = new SignalPickup({ db: txA!.pool, record: (input, settled) => laneA.add(input, settled), onRecorded: (w) => reported.a!.push(w.id) });
    expect((await b.pickUp(10)).picked).toBe(1);
    expect((await a.pickUp(10)).picked).toBe(1);
    await laneA.idle();
    for (const add of heldByB) add();
    await laneB.idle();
    const [wf] = await t.q<{ id: string }>(`SELECT id FROM stepd.workflows`);
    const [paid] = await getSteps(t, wf!.id);
    expect(paid).toMatchObject({ name: 'paid', status: 'done', executor_id: 'lane-a' });
    expect(reported).toEqual({ a: [paid!.id], b: [] });
    expect([a.inFlight, b.inFlight]).toEqual([0, 0]);
  });

  it('takes no more than the room it is given, nor more than PICKUP_BATCH, and says when more may wait', async () => {
    const t = await createTestSchema();
    await readiedWaits(t, 5);
    const p = await pickupOn(t);
    expect(await p.pickup.pickUp(0)).toEqual({ picked: 0, more: true });
    expect(await p.pickup.pickUp(2)).toEqual({ picked: 2, more: true });
    // After a full look the next is fair across roles, and says more may wait (the oldest).
    expect(await p.pickup.pickUp(PICKUP_BATCH * 10)).toEqual({ picked: 3, more: true });
    expect(await p.pickup.pickUp(PICKUP_BATCH * 10)).toEqual({ picked: 0, more: false });
    expect(new Set(p.given.map((g) => g.stepId)).size).toBe(5);
  });

  it("after a full look, looks fairly across roles: another role's wait is not held behind one role's flood", async () => {
    const t = await createTestSchema();
    const executor = await startExecutor(t);
    const flood: string[] = [];
    for (let i = 0; i < 40; i++) flood.push(await insertWorkflow(t, PAID, { order: `a-${i}` }));
    const other = await insertWorkflow(t, PAID, { order: 'b-1' });
    await waitFor(async () => {
      const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'paid' AND status = 'pending'`);
      return r!.n === 41;
    }, 'the waits to be pending');
    await executor.stop({ graceMs: 0 });
    // Another tenant's workflow (its lane is its role), whose signal comes after the flood's.
    await asExecutor(t, `UPDATE stepd.workflows SET created_role = 'tenant_b' WHERE id = $1`, [other]);
    await t.q(`INSERT INTO stepd.signals (name, key, payload) SELECT 'payment', 'a-' || n, '{}' FROM generate_series(0, 39) AS n`);
    await t.q(`INSERT INTO stepd.signals (name, key, payload) VALUES ('payment', 'b-1', '{}')`);
    const p = await pickupOn(t);
    expect(await p.pickup.pickUp(10)).toEqual({ picked: 10, more: true });
    expect(p.given.every((g) => g.workflowId !== other)).toBe(true);
    // The first look was full: the second is fair, and the other role's wait is in it.
    const second = await p.pickup.pickUp(10);
    expect(second.picked).toBeGreaterThan(0);
    expect(p.given.slice(10).map((g) => g.workflowId)).toContain(other);
    expect(p.given.find((g) => g.workflowId === other)).toMatchObject({ lane: 'tenant_b', guard: 'signalled' });
    // Then oldest first again: the flood goes on where it was, nothing handed twice.
    await p.pickup.pickUp(64);
    expect(new Set(p.given.map((g) => g.stepId)).size).toBe(p.given.length);
    expect(p.given).toHaveLength(41);
  });
});
