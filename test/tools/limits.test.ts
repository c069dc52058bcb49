import { describe, expect, it } from 'vitest';
import { createLimitPolicy } from '../../src/tools/limits.js';

describe('limits', () => {
  it('has no limits and no concurrency without a limits section', () => {
    const policy = createLimitPolicy(undefined);
    expect(policy.concurrency).toBeUndefined();
    expect(policy.unlimited).toBe(true);
    const releases = Array.from({ length: 100 }, () => policy.tryAcquire('llm.summarize', 'james'));
    expect(releases.every((r) => r !== null)).toBe(true);
  });

  it('reports the global concurrency', () => {
    expect(createLimitPolicy({ concurrency: 32 }).concurrency).toBe(32);
  });

  it('holds a tool pattern at its maximum until a slot is released', () => {
    const policy = createLimitPolicy({ tools: { 'llm.*': 2 } });
    const a = policy.tryAcquire('llm.summarize', 'james');
    const b = policy.tryAcquire('llm.translate', 'ann');
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    expect(policy.tryAcquire('llm.summarize', 'bob')).toBeNull();
    expect(policy.tryAcquire('kb.search', 'bob')).not.toBeNull();
    expect(policy.snapshot().tools['llm.*']).toEqual({ running: 2, max: 2 });
    a?.();
    expect(policy.tryAcquire('llm.summarize', 'bob')).not.toBeNull();
  });

  it('applies every matching pattern and the user maximum together', () => {
    const policy = createLimitPolicy({ tools: { '*': 3, 'llm.*': 2, 'llm.big': 1 }, users: { james: 2 } });
    const big = policy.tryAcquire('llm.big', 'ann');
    expect(big).not.toBeNull();
    expect(policy.tryAcquire('llm.big', 'ann')).toBeNull(); // llm.big at 1
    const small = policy.tryAcquire('llm.small', 'james');
    expect(small).not.toBeNull();
    expect(policy.tryAcquire('llm.small', 'james')).toBeNull(); // llm.* at 2
    const other = policy.tryAcquire('kb.search', 'james');
    expect(other).not.toBeNull();
    expect(policy.tryAcquire('kb.search', 'zed')).toBeNull(); // * at 3
    other?.();
    expect(policy.tryAcquire('kb.search', 'james')).not.toBeNull();
    expect(policy.tryAcquire('kb.search', 'james')).toBeNull(); // james at 2 and * at 3
    expect(policy.snapshot()).toEqual({
      tools: { '*': { running: 3, max: 3 }, 'llm.*': { running: 2, max: 2 }, 'llm.big': { running: 1, max: 1 } },
      users: { james: { running: 2, max: 2 } },
    });
  });

  it('does not count a refused acquire and releases only once', () => {
    const policy = createLimitPolicy({ tools: { 'kb.*': 1 }, users: { james: 5 } });
    const first = policy.tryAcquire('kb.a', 'james');
    expect(policy.tryAcquire('kb.b', 'james')).toBeNull();
    expect(policy.snapshot().users.james).toEqual({ running: 1, max: 5 });
    first?.();
    first?.();
    expect(policy.snapshot().tools['kb.*']).toEqual({ running: 0, max: 1 });
    const second = policy.tryAcquire('kb.b', 'james');
    expect(second).not.toBeNull();
    expect(policy.tryAcquire('kb.c', 'james')).toBeNull();
  });

  it('limits users listed by name and counts steps without a tool against the user only', () => {
    const policy = createLimitPolicy({ users: { james: 1 }, tools: { '*': 1 } });
    const gate = policy.tryAcquire(null, 'ann');
    expect(gate).not.toBeNull();
    const r = policy.tryAcquire(null, 'james');
    expect(r).not.toBeNull();
    expect(policy.tryAcquire(null, 'james')).toBeNull();
    expect(policy.tryAcquire('kb.x', null)).not.toBeNull();
  });
});
