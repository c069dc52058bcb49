/**
 * Guessing tokens: after ten wrong ones from an address within a minute (bearer header or the
 * sign-in form), that address gets 429 with Retry-After for every attempt, even a right token,
 * until its window ends; other addresses are not affected, and right tokens never count. The
 * clock is the throttle's own (injected), never waited on.
 */
import { describe, expect, it } from 'vitest';
import { AuthThrottle } from '../../src/http/authThrottle.js';
import { createTestSchema } from '../helpers/db.js';
import { ALICE_TOKEN, buildTestApp, formPost } from './helpers.js';

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

const wrongBearer = (i: number) => ({ headers: { authorization: `Bearer wrong-token-${String(i).padStart(20, '0')}` } });

describe('the failed-authentication throttle on its own', () => {
  it('allows maxFailures wrong tokens per window and address, then asks to wait until the window ends', () => {
    const c = clock();
    const th = new AuthThrottle({ maxFailures: 3, windowMs: 60_000, now: c.now });
    for (let i = 0; i < 3; i++) {
      expect(th.retryAfterMs('a')).toBe(0);
      th.failed('a');
    }
    expect(th.retryAfterMs('a')).toBe(60_000);
    expect(th.retryAfterMs('b')).toBe(0);
    c.advance(59_000);
    expect(th.retryAfterMs('a')).toBe(1_000);
    c.advance(1_000);
    expect(th.retryAfterMs('a')).toBe(0);
  });

  it('remembers at most maxAddresses addresses, forgetting the oldest first', () => {
    const c = clock();
    const th = new AuthThrottle({ maxFailures: 1, windowMs: 60_000, maxAddresses: 2, now: c.now });
    th.failed('a');
    th.failed('b');
    th.failed('c');
    expect(th.retryAfterMs('a')).toBe(0);
    expect(th.retryAfterMs('b')).toBeGreaterThan(0);
    expect(th.retryAfterMs('c')).toBeGreaterThan(0);
  });
});

describe('guessing tokens over HTTP', () => {
  it('answers 429 with Retry-After after ten wrong bearer tokens from one address, to a right token too; another address is served', async () => {
    const c = clock();
    const { request } = buildTestApp(await createTestSchema(), { tokens: { [ALICE_TOKEN]: 'alice' }, throttle: new AuthThrottle({ now: c.now }) });
    const attacker = '203.0.113.7';
    for (let i = 0; i < 10; i++) expect((await request('/healthz', wrongBearer(i), attacker)).status).toBe(401);
    const blocked = await request('/healthz', wrongBearer(99), attacker);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('60');
    expect((await request('/healthz', { headers: { authorization: `Bearer ${ALICE_TOKEN}` } }, attacker)).status).toBe(429);
    expect((await request('/healthz', { headers: { authorization: `Bearer ${ALICE_TOKEN}` } }, '198.51.100.2')).status).toBe(200);
    c.advance(60_000);
    expect((await request('/healthz', { headers: { authorization: `Bearer ${ALICE_TOKEN}` } }, attacker)).status).toBe(200);
  });

  it('counts wrong tokens of the sign-in form too, and shows the wait on the form', async () => {
    const c = clock();
    const { request } = buildTestApp(await createTestSchema(), { tokens: { [ALICE_TOKEN]: 'alice' }, throttle: new AuthThrottle({ now: c.now }) });
    for (let i = 0; i < 10; i++) expect((await request('/sign-in', formPost({ token: `wrong-${i}`, next: '/' }))).status).toBe(401);
    const blocked = await request('/sign-in', formPost({ token: ALICE_TOKEN, next: '/' }));
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('set-cookie')).toBeNull();
    expect(await blocked.text()).toMatch(/Too many wrong tokens from this address; try again in 60 s/);
  });

  it('never counts right tokens', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens: { [ALICE_TOKEN]: 'alice' } });
    for (let i = 0; i < 30; i++) expect((await request('/healthz', { headers: { authorization: `Bearer ${ALICE_TOKEN}` } })).status).toBe(200);
  });
});
