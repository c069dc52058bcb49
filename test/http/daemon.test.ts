/**
 * `stepd start --http` as a user runs it: the built CLI as a child process, requests over real
 * sockets.
 */
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { httpSettingsFrom } from '../../src/http/httpSettings.js';
import { envFor, runCli, spawnCli, writeJson } from '../cli/helpers.js';
import { createTestSchema } from '../helpers/db.js';
import { ALICE_TOKEN } from './helpers.js';

const READY = /stepd: dashboard at (http:\/\/[^\s]+:\d+)\//;

/** An IPv4 address of this machine that is not loopback, if it has one. */
function externalAddress(): string | undefined {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

describe('stepd start --http', () => {
  it('with api.tokens, answers 401 without a token and serves the token user, never logging the token', async () => {
    const t = await createTestSchema();
    const config = await writeJson({ api: { tokens: { '${OPS_TOKEN}': 'alice' } } }, 'stepd.config.json');
    const daemon = spawnCli(['start', '--http', '0', '--config', config], { env: { ...envFor(t), OPS_TOKEN: ALICE_TOKEN, STEPD_LOG_LEVEL: 'debug' } });
    const base = (await daemon.waitFor(READY))[1]!;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:/);
    expect((await fetch(`${base}/`)).status).toBe(401);
    const ok = await fetch(`${base}/`, { headers: { authorization: `Bearer ${ALICE_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('signed in as <strong>alice</strong>');
    // /mcp is mounted behind the same check.
    expect((await fetch(`${base}/mcp`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${base}/mcp`, { method: 'GET', headers: { authorization: `Bearer ${ALICE_TOKEN}` } })).status).toBe(405);
    const { stderr } = await daemon.kill('SIGTERM');
    expect(stderr).not.toContain(ALICE_TOKEN);
  });

  it('without tokens, refuses a client that reaches it over a non-loopback address', async (ctx) => {
    const external = externalAddress();
    if (!external) ctx.skip();
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--http-host', '0.0.0.0', '--user', 'ops'], { env: envFor(t) });
    const port = (await daemon.waitFor(READY))[1]!.split(':').pop()!;
    const local = await fetch(`http://127.0.0.1:${port}/`);
    expect(local.status).toBe(200);
    expect(await local.text()).toContain('signed in as <strong>ops</strong>');
    const remote = await fetch(`http://${external}:${port}/`);
    expect(remote.status).toBe(403);
    expect(await remote.text()).toMatch(/only loopback clients/);
    await daemon.kill('SIGTERM');
    expect(daemon.stderr).toMatch(/no api.tokens configured: the http server answers only loopback clients/);
  });

  it('stops cleanly on SIGTERM while a page holds an event stream open', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0'], { env: envFor(t) });
    const base = (await daemon.waitFor(READY))[1]!;
    const res = await fetch(`${base}/events`);
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('event: ready');
    const ended = reader.read().then(
      (r) => r.done,
      () => true,
    );
    const result = await daemon.kill('SIGTERM');
    expect(result.code).toBe(0);
    expect(await ended).toBe(true);
  });

  it('refuses a port that is not a number before starting anything', async () => {
    const res = await runCli(['start', '--http', 'eighty'], { env: { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' } });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('http: must be a port number from 0 to 65535 (got "eighty")');
  });
});

describe('http settings', () => {
  it('takes flags over the environment, defaults to 127.0.0.1, and serves no HTTP without a port', () => {
    expect(httpSettingsFrom({}, {})).toBeUndefined();
    expect(httpSettingsFrom({}, { STEPD_HTTP: '8080', STEPD_USER: 'zoe' })).toEqual({ port: 8080, host: '127.0.0.1', localUser: 'zoe' });
    expect(httpSettingsFrom({ http: '0', httpHost: '::1', user: 'amy' }, { STEPD_HTTP: '8080', STEPD_HTTP_HOST: '0.0.0.0', STEPD_USER: 'zoe' })).toEqual({ port: 0, host: '::1', localUser: 'amy' });
    expect(httpSettingsFrom({ http: '9000' }, {})?.localUser).toBeTruthy();
    expect(() => httpSettingsFrom({ http: '70000' }, {})).toThrow(/must be a port number/);
    expect(() => httpSettingsFrom({ http: '-1' }, {})).toThrow(/must be a port number/);
  });
});
