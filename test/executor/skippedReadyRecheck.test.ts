import { describe, expect, it } from 'vitest';
import { FIRST_RECHECK_MS, SkippedReadyRecheck } from '../../src/executor/claims/skippedReadyRecheck.js';

describe('readied steps a claim may have skipped', () => {
  it('looks again soon when a claim took fewer rows than were announced, backing off while the shortfall lasts', () => {
    const r = new SkippedReadyRecheck(1_000);
    r.noteReadied();
    r.noteReadied();
    expect(r.afterClaim(1)).toBe(FIRST_RECHECK_MS);
    expect(r.afterClaim(0)).toBe(FIRST_RECHECK_MS * 2);
    expect(r.afterClaim(0)).toBe(FIRST_RECHECK_MS * 4);
    // The skipped row is taken: nothing is missing, and the next shortfall starts from the first delay.
    expect(r.afterClaim(1)).toBeUndefined();
    r.noteReadied();
    expect(r.afterClaim(0)).toBe(FIRST_RECHECK_MS);
  });

  it('asks for nothing when every announced readying was claimed, or when claims took more (own work)', () => {
    const r = new SkippedReadyRecheck(1_000);
    expect(r.afterClaim(0)).toBeUndefined();
    r.noteReadied();
    expect(r.afterClaim(1)).toBeUndefined();
    r.noteReadied();
    expect(r.afterClaim(5)).toBeUndefined();
  });

  it('gives up at the poll interval (the poll looks from there), so a hint another executor answered costs a few claims, not a loop', () => {
    const r = new SkippedReadyRecheck(100);
    r.noteReadied();
    const delays: number[] = [];
    for (let ms = r.afterClaim(0); ms !== undefined; ms = r.afterClaim(0)) delays.push(ms);
    expect(delays).toEqual([5, 10, 20, 40, 80]);
    // Forgotten: a claim with nothing new announced asks for nothing.
    expect(r.afterClaim(0)).toBeUndefined();
  });
});
