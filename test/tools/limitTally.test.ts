import { describe, expect, it } from 'vitest';
import { createLimitPolicy } from '../../src/tools/limits.js';

describe('limit tallies (what a limited claim counts)', () => {
  it('seeds a fresh tally with the running steps the database reports and admits only what fits', () => {
    const policy = createLimitPolicy({ tools: { 'llm.*': 3 } });
    const tally = policy.tally();
    tally.add('llm.big', 'ann', 2);
    expect(tally.tryAcquire('llm.small', 'bob')).not.toBeNull();
    expect(tally.tryAcquire('llm.small', 'bob')).toBeNull();
    expect(tally.saturated().toolPatterns).toEqual(['llm.*']);
    // Each claim starts from the database's counts, not from the last claim's.
    expect(policy.tally().tryAcquire('llm.small', 'bob')).not.toBeNull();
  });

  it('gives every user not named under users the defaultUser limit, each on their own', () => {
    const tally = createLimitPolicy({ users: { vip: 3 }, defaultUser: 1 }).tally();
    expect(tally.tryAcquire('kb.a', 'zed')).not.toBeNull();
    expect(tally.tryAcquire('kb.a', 'zed')).toBeNull();
    expect(tally.tryAcquire('kb.a', 'amy')).not.toBeNull();
    expect(tally.tryAcquire('kb.a', 'vip')).not.toBeNull();
    expect(tally.tryAcquire('kb.a', 'vip')).not.toBeNull();
    expect(tally.saturated().users.sort()).toEqual(['amy', 'zed']);
    expect(tally.snapshot().users).toEqual({ vip: { running: 2, max: 3 }, zed: { running: 1, max: 1 }, amy: { running: 1, max: 1 } });
  });

  it('holds the global concurrency over tool steps only', () => {
    const tally = createLimitPolicy({ concurrency: 2 }).tally();
    tally.add('kb.a', 'ann', 1);
    expect(tally.tryAcquire('kb.b', 'bob')).not.toBeNull();
    expect(tally.tryAcquire('kb.c', 'cid')).toBeNull();
    expect(tally.saturated().global).toBe(true);
    expect(tally.tryAcquire(null, 'cid')).not.toBeNull();
  });

  it('says which steps a limit applies to: those are never claimed on creation', () => {
    expect(createLimitPolicy(undefined).unlimited).toBe(true);
    const tools = createLimitPolicy({ tools: { 'llm.*': 1 }, users: { bob: 2 } });
    expect(tools.unlimited).toBe(false);
    expect(tools.applies('llm.x', 'ann')).toBe(true);
    expect(tools.applies('kb.x', 'ann')).toBe(false);
    expect(tools.applies('kb.x', 'bob')).toBe(true);
    expect(tools.applies(null, 'bob')).toBe(false);
    expect(createLimitPolicy({ defaultUser: 5 }).applies('kb.x', null)).toBe(true);
    expect(createLimitPolicy({ concurrency: 5 }).applies('kb.x', 'ann')).toBe(true);
  });
});
