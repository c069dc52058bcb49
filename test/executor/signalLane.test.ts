import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { NO_ROOM_MS, SignalLane, type SignalLaneDeps } from '../../src/executor/claims/signalLane.js';
import type { Pickup } from '../../src/executor/claims/signalPickup.js';
import { DatabaseOutage } from '../../src/executor/core/dbOutage.js';
import { silentLogger } from '../../src/logger.js';
import { waitFor } from '../helpers/db.js';

/** A lane whose looks are recorded: `answer` says what each look returns (room is passed in). */
function laneWith(answer: (room: number, look: number) => Pickup | Promise<Pickup>, over: Partial<SignalLaneDeps> = {}) {
  const looks: number[] = [];
  const log = silentLogger();
  const outage = new DatabaseOutage({ log });
  const lane = new SignalLane({
    logFailure: (err, delayMs) => log.error({ err, delayMs }, 'look failed'),
    pickUp: async (room) => {
      looks.push(Date.now());
      return answer(room, looks.length);
    },
    room: () => 100,
    outage,
    // Long enough that no test passes by the poll tick.
    pollIntervalMs: 60_000,
    ...over,
  });
  const done = lane.run();
  return { lane, looks, outage, done };
}

const NOTHING: Pickup = { picked: 0, more: false };

describe('the signal lane: readied signal waits looked for beside the claim loop', () => {
  const open: SignalLane[] = [];
  afterEach(() => {
    for (const l of open.splice(0)) l.close();
  });

  it('looks once at start, then only when asked (a stepReady wake-up), not at every turn of a loop', async () => {
    const { lane, looks } = laneWith(() => NOTHING);
    open.push(lane);
    await waitFor(() => looks.length === 1, 'the first look');
    lane.request();
    await waitFor(() => looks.length === 2, 'a look after the request');
    // Nothing asked since, and the poll is a minute away: the lane waits.
    await new Promise((r) => setTimeout(r, 100));
    expect(looks).toHaveLength(2);
  });

  it('after a look that handed waits over, looks again by itself (signals that skipped their NOTIFY), and stops once looks find none', async () => {
    // Looks 1–3 find a wait each; the rest find none.
    const { lane, looks } = laneWith((_room, n) => (n <= 3 ? { picked: 1, more: false } : NOTHING));
    open.push(lane);
    await waitFor(() => looks.length >= 4, 'looks that follow the ones that found waits, unasked');
    // Then the lookout backs off (doubling from a few ms) and gives up 500 ms after the last find:
    // far fewer looks than a loop that kept looking would make in that time.
    await new Promise((r) => setTimeout(r, 900));
    const settled = looks.length;
    expect(settled).toBeLessThan(12);
    await new Promise((r) => setTimeout(r, 300));
    expect(looks).toHaveLength(settled);
  });

  it('a full look is followed at once by the next, without a request', async () => {
    let left = 5;
    const { lane, looks } = laneWith(() => (left-- > 0 ? { picked: 64, more: true } : NOTHING));
    open.push(lane);
    await waitFor(() => looks.length >= 6, 'a look after each full one');
  });

  it('with no room in the outcome queue it does not spin: it looks again about every NO_ROOM_MS, and hands waits over once room frees', async () => {
    let room = 0;
    const { lane, looks } = laneWith((r) => (r <= 0 ? { picked: 0, more: true } : { picked: 1, more: false }), { room: () => room });
    open.push(lane);
    await waitFor(() => looks.length >= 2, 'a second look while there is no room');
    const from = looks.length;
    await new Promise((r) => setTimeout(r, 10 * NO_ROOM_MS));
    // Requests while there is no room do not cut the pause short either.
    for (let i = 0; i < 50; i++) lane.request();
    // A spinning lane would look thousands of times here; a paused one about ten.
    expect(looks.length - from).toBeLessThanOrEqual(12);
    room = 10;
    const before = looks.length;
    await waitFor(() => looks.length > before, 'a look once room frees');
  });

  it('a failed look (database unreachable) is an outage, retried with backoff, and the lane goes on once it answers', async () => {
    // A real connection refused: nothing listens on port 1.
    const dead = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', connectionTimeoutMillis: 2_000 });
    let reachable = false;
    const { lane, looks, outage } = laneWith(async () => {
      if (!reachable) await dead.query('SELECT 1');
      return NOTHING;
    });
    open.push(lane);
    try {
      await waitFor(() => outage.active, 'the outage reported');
      reachable = true;
      await waitFor(() => !outage.active, 'the outage over once a look went through');
      const after = looks.length;
      lane.request();
      await waitFor(() => looks.length > after, 'the lane still looking when asked');
    } finally {
      await dead.end();
    }
  });

  it('close() ends the loop, even in the middle of a no-room pause', async () => {
    const { lane, looks, done } = laneWith(() => ({ picked: 0, more: true }), { room: () => 0 });
    await waitFor(() => looks.length >= 1, 'a look');
    lane.close();
    await done;
    const n = looks.length;
    lane.request();
    await new Promise((r) => setTimeout(r, 3 * NO_ROOM_MS));
    expect(looks).toHaveLength(n);
  });
});
