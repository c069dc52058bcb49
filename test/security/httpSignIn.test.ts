/**
 * The daemon's HTTP sign-in from an attacker's side: after signing in, the form redirects to its
 * `next` path, which a link can choose (`/sign-in?next=…`). It must stay on this server: browsers
 * drop tabs and newlines inside URLs and read `\` as `/`, so `/<TAB>/evil.example` is
 * `//evil.example`, another site.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { ALICE_TOKEN, buildTestApp, formPost } from '../http/helpers.js';

describe('the sign-in redirect stays on this server', () => {
  it('refuses next paths a browser would resolve to another host, and keeps local ones', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens: { [ALICE_TOKEN]: 'alice' } });
    const base = 'http://127.0.0.1:8080';
    for (const next of ['/\t/evil.example/', '/\t\\evil.example', '/\r/evil.example', '\\/evil.example', '/\\/evil.example', '//evil.example', 'https://evil.example/']) {
      const res = await request('/sign-in', formPost({ token: ALICE_TOKEN, next }));
      expect(res.status, JSON.stringify(next)).toBe(303);
      const location = res.headers.get('location') ?? '';
      expect(new URL(location, base).origin, JSON.stringify(next)).toBe(base);
      expect(location, JSON.stringify(next)).toBe('/');
    }
    for (const next of ['/workflows/7?x=1', '/workflows?status=failed&name=a%2Fb']) {
      const res = await request('/sign-in', formPost({ token: ALICE_TOKEN, next }));
      expect(res.headers.get('location')).toBe(next);
    }
  });

  it('the form does not carry a foreign next from its link either', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens: { [ALICE_TOKEN]: 'alice' } });
    const page = await request(`/sign-in?next=${encodeURIComponent('/\t/evil.example/')}`, { headers: { accept: 'text/html' } });
    expect(await page.text()).toContain('name="next" value="/"');
  });
});
