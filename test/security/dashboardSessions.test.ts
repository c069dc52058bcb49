/**
 * The dashboard's cookies, sessions and CSRF tokens against a real `stepd start --http` daemon:
 *   - the session cookie is `Secure` when the browser came over TLS, which behind a reverse
 *     proxy only a trusted proxy (`api.trustProxy`) may say with `X-Forwarded-Proto: https`;
 *   - sign-out revokes the session: the old cookie, replayed, is refused;
 *   - each session has its own CSRF token: session 1's token in session 2 is refused.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../src/configFile.js';
import { Sessions } from '../../src/http/sessions.js';
import { envFor, spawnCli, writeJson } from '../cli/helpers.js';
import { ALICE_TOKEN, gatedFlow } from '../http/helpers.js';
import { createTestSchema, getSteps, insertWorkflow, waitForStep, type TestSchema } from '../helpers/db.js';

const READY = /stepd: dashboard at (http:\/\/[^\s]+:\d+)\//;

async function startDaemon(t: TestSchema, trustProxy: string[]): Promise<{ base: string; stop(): Promise<void> }> {
  const config = await writeJson({ api: { tokens: { '${OPS_TOKEN}': 'alice' }, trustProxy } }, 'stepd.config.json');
  const daemon = spawnCli(['start', '--http', '0', '--config', config, '--executor-id', `dash-${randomBytes(4).toString('hex')}`], {
    env: { ...envFor(t), OPS_TOKEN: ALICE_TOKEN },
  });
  const base = (await daemon.waitFor(READY))[1]!;
  return { base, stop: async () => void (await daemon.kill('SIGTERM')) };
}

/** Signs in with the form; the Set-Cookie header and the `name=value` to send back. */
async function signIn(base: string, headers: Record<string, string> = {}): Promise<{ setCookie: string; cookie: string }> {
  const res = await fetch(`${base}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ token: ALICE_TOKEN, next: '/' }).toString(),
  });
  expect(res.status).toBe(303);
  const setCookie = res.headers.get('set-cookie') ?? '';
  return { setCookie, cookie: setCookie.split(';')[0]! };
}

async function csrfOf(base: string, cookie: string): Promise<string> {
  const page = await (await fetch(`${base}/`, { headers: { accept: 'text/html', cookie } })).text();
  return /name="csrf" value="([^"]+)"/.exec(page)![1]!;
}

function post(base: string, path: string, cookie: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base, 'sec-fetch-site': 'same-origin', cookie, ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

describe('dashboard cookies behind TLS', () => {
  it('are Secure when a trusted proxy says https, and not when an untrusted peer says so', async () => {
    const t = await createTestSchema();
    const trusting = await startDaemon(t, ['127.0.0.1', '10.0.0.0/8']);
    const wary = await startDaemon(t, ['10.0.0.0/8', '::ffff:192.0.2.1']);
    try {
      expect((await signIn(trusting.base, { 'x-forwarded-proto': 'https' })).setCookie).toMatch(/;\s*Secure/i);
      // A proxy that appends: the nearest proxy's value (the last) decides.
      expect((await signIn(trusting.base, { 'x-forwarded-proto': 'http, https' })).setCookie).toMatch(/;\s*Secure/i);
      expect((await signIn(trusting.base, { 'x-forwarded-proto': 'https, http' })).setCookie).not.toMatch(/Secure/i);
      expect((await signIn(trusting.base)).setCookie).not.toMatch(/Secure/i);
      // 127.0.0.1 is not in this daemon's trustProxy: the header is anyone's word.
      const untrusted = await signIn(wary.base, { 'x-forwarded-proto': 'https' });
      expect(untrusted.setCookie).toMatch(/HttpOnly/i);
      expect(untrusted.setCookie).not.toMatch(/Secure/i);

      // Behind the trusted proxy the browser's origin is https://…: its form posts are same-origin.
      const { cookie } = await signIn(trusting.base, { 'x-forwarded-proto': 'https' });
      const httpsOrigin = trusting.base.replace(/^http:/, 'https:');
      const out = await post(trusting.base, '/sign-out', cookie, {}, { origin: httpsOrigin, 'x-forwarded-proto': 'https' });
      expect(out.status).toBe(303);
      expect(out.headers.get('set-cookie')).toMatch(/;\s*Secure/i);
      // …and from the untrusted peer such an origin is another site's.
      const { cookie: other } = await signIn(wary.base);
      expect((await post(wary.base, '/sign-out', other, {}, { origin: wary.base.replace(/^http:/, 'https:'), 'x-forwarded-proto': 'https' })).status).toBe(403);
    } finally {
      await trusting.stop();
      await wary.stop();
    }
  });
});

describe('dashboard sessions', () => {
  it('sign-out revokes the session: the old cookie replayed is refused, another session stays valid', async () => {
    const t = await createTestSchema();
    const daemon = await startDaemon(t, []);
    try {
      const first = await signIn(daemon.base);
      const second = await signIn(daemon.base);
      expect((await fetch(`${daemon.base}/healthz`, { headers: { cookie: first.cookie } })).status).toBe(200);
      const out = await post(daemon.base, '/sign-out', first.cookie, {});
      expect(out.status).toBe(303);
      expect(out.headers.get('set-cookie')).toMatch(/stepd_session=;/);

      // The attacker kept a copy of the cookie: the API, the pages and the sign-out itself refuse it.
      expect((await fetch(`${daemon.base}/healthz`, { headers: { cookie: first.cookie } })).status).toBe(401);
      const page = await fetch(`${daemon.base}/`, { redirect: 'manual', headers: { accept: 'text/html', cookie: first.cookie } });
      expect(page.status).toBe(303);
      expect(page.headers.get('location')).toMatch(/^\/sign-in/);
      expect((await post(daemon.base, '/sign-out', first.cookie, {})).status).toBe(401);
      // The same user's other session is not signed out.
      expect((await fetch(`${daemon.base}/healthz`, { headers: { cookie: second.cookie } })).status).toBe(200);
    } finally {
      await daemon.stop();
    }
  });

  it("a CSRF token of one session is refused in another, even the same user's; the session's own works", async () => {
    const t = await createTestSchema();
    const daemon = await startDaemon(t, []);
    try {
      const id = await insertWorkflow(t, gatedFlow, {}, { user: 'alice' });
      const gate = await waitForStep(t, id, 'review', 'pending');
      const path = `/workflows/${id}/steps/${gate.id}/approve`;
      const one = await signIn(daemon.base);
      const two = await signIn(daemon.base);
      const tokenOne = await csrfOf(daemon.base, one.cookie);
      const tokenTwo = await csrfOf(daemon.base, two.cookie);
      expect(tokenOne).not.toBe(tokenTwo);

      const refused = await post(daemon.base, path, two.cookie, { csrf: tokenOne });
      expect(refused.status).toBe(403);
      expect(await refused.text()).toMatch(/wrong CSRF token/);
      // The header form of the token, too.
      expect((await post(daemon.base, path, two.cookie, {}, { 'x-csrf-token': tokenOne })).status).toBe(403);
      // A signed-out session's token does not come back to life in a new session either.
      await post(daemon.base, '/sign-out', one.cookie, {});
      expect((await post(daemon.base, path, two.cookie, { csrf: tokenOne })).status).toBe(403);
      expect((await getSteps(t, id)).find((s) => s.name === 'review')?.status).toBe('pending');

      const ok = await post(daemon.base, path, two.cookie, { csrf: tokenTwo });
      expect(ok.status).toBe(303);
      expect((await getSteps(t, id)).find((s) => s.name === 'review')?.readied_by).toBe('alice');
    } finally {
      await daemon.stop();
    }
  });
});

describe('the revocation list and the trustProxy setting', () => {
  it('stays bounded: past maxRevoked the sessions expiring first are refused with the dropped entries, never let back in', () => {
    const sessions = new Sessions({ maxRevoked: 3, ttlMs: 60_000 });
    const at = (s: number) => new Date(1_700_000_000_000 + s * 1000);
    const cookies = [0, 1, 2, 3, 4].map((s) => sessions.issue('alice', at(s)));
    const later = sessions.issue('alice', at(10));
    for (const c of cookies) sessions.revoke(c, at(20));
    expect(sessions.revokedCount).toBe(3);
    for (const c of cookies) expect(sessions.verify(c, at(21))).toBeUndefined();
    expect(sessions.verify(later, at(21))?.user).toBe('alice');
    // Expired entries leave the list; an unknown or forged cookie never enters it.
    sessions.revoke('x.eA.9999999999999.bad', at(21));
    expect(sessions.revokedCount).toBe(3);
    sessions.revoke(later, at(65));
    expect(sessions.revokedCount).toBe(1);
  });

  it('api.trustProxy takes addresses and CIDR ranges, and names a bad entry', () => {
    expect(parseConfigFile({ api: { trustProxy: ['10.0.0.5', '10.1.0.0/16', '::1', 'fd00::/8'] } }).api?.trustProxy).toHaveLength(4);
    for (const bad of [['proxy.example'], ['10.0.0.0/33'], '10.0.0.1', [7]]) {
      expect(() => parseConfigFile({ api: { trustProxy: bad } }), JSON.stringify(bad)).toThrow(/api\.trustProxy/);
    }
  });
});
