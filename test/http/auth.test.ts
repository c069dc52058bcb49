import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitForStep, getSteps } from '../helpers/db.js';
import { ALICE_TOKEN, BOB_TOKEN, buildTestApp, cookieOf, formPost, gatedFlow, pageCsrf } from './helpers.js';

const tokens = { [ALICE_TOKEN]: 'alice', [BOB_TOKEN]: 'bob' };
const html = { accept: 'text/html' };

describe('without api.tokens: loopback only, as the daemon user', () => {
  it('serves a loopback client as the --user', async () => {
    const { request } = buildTestApp(await createTestSchema(), { localUser: 'carol' });
    const res = await request('/', { headers: html });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('signed in as <strong>carol</strong>');
  });

  it('refuses a client that is not on loopback', async () => {
    const { request } = buildTestApp(await createTestSchema());
    for (const from of ['10.1.2.3', '192.168.0.9', '::ffff:172.16.0.1', '2001:db8::1']) {
      const res = await request('/', { headers: html }, from);
      expect(res.status, from).toBe(403);
      expect(await res.text()).toMatch(/only loopback clients/);
    }
    expect((await request('/healthz', {}, '::1')).status).toBe(200);
    expect((await request('/healthz', {}, '::ffff:127.0.0.1')).status).toBe(200);
  });

  it('refuses a loopback request addressed to another host name (DNS rebinding)', async () => {
    const { request } = buildTestApp(await createTestSchema());
    const res = await request('http://attacker.example:8080/', { headers: html });
    expect(res.status).toBe(403);
    expect((await request('http://127.0.0.1:8080/healthz')).status).toBe(200);
    expect((await request('http://[::1]:8080/healthz')).status).toBe(200);
  });
});

describe('with api.tokens: every request needs a token', () => {
  it('answers 401 without a token, and sends a browser to the sign-in form', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens });
    const api = await request('/healthz');
    expect(api.status).toBe(401);
    expect(api.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const page = await request('/workflows/7?x=1', { headers: html });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe(`/sign-in?next=${encodeURIComponent('/workflows/7?x=1')}`);
    const form = await request('/sign-in', { headers: html });
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('name="token"');
  });

  it('accepts a Bearer token as its user and refuses an unknown one', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens });
    const ok = await request('/', { headers: { ...html, authorization: `Bearer ${BOB_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('signed in as <strong>bob</strong>');
    const bad = await request('/', { headers: { ...html, authorization: 'Bearer not-a-token-at-all-xxxxxx' } });
    expect(bad.status).toBe(401);
    // Tokens work from any address: the loopback rule is for the token-less mode.
    expect((await request('/healthz', { headers: { authorization: `Bearer ${ALICE_TOKEN}` } }, '10.0.0.8')).status).toBe(200);
  });

  it('signs in with the form: an HttpOnly SameSite cookie that is not the token, which then authenticates', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens });
    const wrong = await request('/sign-in', formPost({ token: 'wrong-token-xxxxxxxxxxxxxx', next: '/' }));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();

    const res = await request('/sign-in', formPost({ token: ALICE_TOKEN, next: '/workflows/3' }));
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/workflows/3');
    const setCookie = res.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Strict/i);
    expect(setCookie).not.toContain(ALICE_TOKEN);
    const page = await request('/', { headers: { ...html, cookie: cookieOf(res) } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('signed in as <strong>alice</strong>');

    // A cookie edited to name another user is not a session.
    const [, expires, mac] = cookieOf(res).split('=')[1]!.split('.');
    const forged = `stepd_session=${Buffer.from('bob').toString('base64url')}.${expires}.${mac}`;
    expect((await request('/', { headers: { ...html, cookie: forged } })).status).toBe(303);
  });

  it('sends a signed-in user only to a path on this server after sign-in', async () => {
    const { request } = buildTestApp(await createTestSchema(), { tokens });
    for (const next of ['https://evil.example/', '//evil.example/x', '/\\evil.example']) {
      const res = await request('/sign-in', formPost({ token: ALICE_TOKEN, next }));
      expect(res.headers.get('location'), next).toBe('/');
    }
  });
});

describe('state-changing requests are protected against CSRF', () => {
  async function gate() {
    const t = await createTestSchema();
    await startExecutor(t);
    const id = await insertWorkflow(t, gatedFlow, {}, { user: 'alice' });
    const step = await waitForStep(t, id, 'review', 'pending');
    return { t, id, stepId: String(step.id) };
  }

  it('refuses a session POST without the page token, or from another origin, and accepts the dashboard form', async () => {
    const { t, id, stepId } = await gate();
    const { request, sessions } = buildTestApp(t, { tokens });
    const signIn = await request('/sign-in', formPost({ token: ALICE_TOKEN, next: '/' }));
    const cookie = cookieOf(signIn);
    const path = `/workflows/${id}/steps/${stepId}/approve`;
    const csrf = await pageCsrf(request, cookie);

    expect((await request(path, formPost({}, { cookie }))).status).toBe(403);
    expect((await request(path, formPost({ csrf: sessions.csrfToken('bob') }, { cookie }))).status).toBe(403);
    expect((await request(path, formPost({ csrf }, { cookie, origin: 'https://evil.example' }))).status).toBe(403);
    expect((await request(path, formPost({ csrf }, { cookie, 'sec-fetch-site': 'cross-site' }))).status).toBe(403);
    expect((await getSteps(t, id)).find((s) => s.name === 'review')?.status).toBe('pending');

    const ok = await request(path, formPost({ csrf }, { cookie }));
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe(`/workflows/${id}`);
    expect((await getSteps(t, id)).find((s) => s.name === 'review')?.readied_by).toBe('alice');
  });

  it('without tokens, a cross-site form cannot approve on 127.0.0.1 either', async () => {
    const { t, id, stepId } = await gate();
    const { request, sessions } = buildTestApp(t, { localUser: 'carol' });
    const path = `/workflows/${id}/steps/${stepId}/approve`;
    expect((await request(path, formPost({}, { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }))).status).toBe(403);
    expect((await request(path, formPost({}))).status).toBe(403);
    const ok = await request(path, formPost({ csrf: sessions.csrfToken('carol') }));
    expect(ok.status).toBe(303);
    expect((await getSteps(t, id)).find((s) => s.name === 'review')?.readied_by).toBe('carol');
  });

  it('a Bearer request needs no page token (a browser never adds the header itself)', async () => {
    const { t, id, stepId } = await gate();
    const { request } = buildTestApp(t, { tokens });
    const res = await request(`/workflows/${id}/steps/${stepId}/reject`, {
      method: 'POST',
      headers: { authorization: `Bearer ${BOB_TOKEN}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'reason=too+late',
    });
    expect(res.status).toBe(303);
    const review = (await getSteps(t, id)).find((s) => s.name === 'review');
    expect(review?.readied_by).toBe('bob');
    expect(review?.result).toMatchObject({ approved: false, reason: 'too late' });
  });
});
