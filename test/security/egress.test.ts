/**
 * Egress policy of `http.request`: a client's flow cannot reach loopback, private, link-local
 * or cloud-metadata addresses (whatever spelling of the address or host name it uses, and not
 * through a redirect) unless an `http.allow` entry names them. A refused call fails its step
 * with the non-retryable `egress_denied` and never opens a connection, so open and closed ports
 * look the same.
 */
import { describe, expect, it } from 'vitest';
import { callFlow, errorsFor, expectDenied } from './egressHelpers.js';
import { clientInsert, securityEnv, startLocalServer, waitForWorkflow } from './helpers.js';

describe('http.request egress policy', () => {
  it('refuses loopback in every spelling without connecting, so open and closed ports look the same', async () => {
    const env = await securityEnv();
    const server = await startLocalServer();
    const p = server.port;
    const urls = [
      `http://127.0.0.1:${p}/`,
      `http://localhost:${p}/`,
      `http://127.1:${p}/`,
      `http://2130706433:${p}/`,
      `http://0x7f000001:${p}/`,
      `http://127.0.0.2:${p}/`,
      `http://0.0.0.0:${p}/`,
      `http://[::1]:${p}/`,
      `http://[::ffff:127.0.0.1]:${p}/`,
      `http://127.0.0.1:1/`, // closed
    ];
    const errors = await errorsFor(env, urls);
    expectDenied(errors);
    expect(server.connections()).toBe(0);
    // A port scan learns nothing: the open and the closed port give the same answer.
    const strip = (m: string) => m.replace(/:\d+/g, ':PORT');
    expect(strip(errors[0]!.message)).toBe(strip(errors.at(-1)!.message));
    await env.bystander.assertUndisturbedAndServed();
  });

  it('refuses private, link-local and cloud-metadata addresses', async () => {
    const env = await securityEnv();
    const urls = [
      'http://10.0.0.1/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
    ];
    expectDenied(await errorsFor(env, urls));
    await env.bystander.assertUndisturbedAndServed();
  });

  it('refuses a redirect to loopback from an allowed server, and never connects to the target', async () => {
    const target = await startLocalServer();
    const redirector = await startLocalServer((req, res) => {
      const to = req.url === '/by-name' ? `http://localhost:${target.port}/secret` : `http://127.0.0.1:${target.port}/secret`;
      res.writeHead(302, { location: to });
      res.end();
    });
    const env = await securityEnv({ config: { http: { allow: [`http://127.0.0.1:${redirector.port}/`] } } });
    expectDenied(await errorsFor(env, [`${redirector.base}/by-address`, `${redirector.base}/by-name`]));
    expect(redirector.requests.sort()).toEqual(['/by-address', '/by-name']);
    expect(target.connections()).toBe(0);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('lets through what an allow entry names, matched as a URL prefix, and nothing beside it', async () => {
    const server = await startLocalServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    });
    const env = await securityEnv({ config: { http: { allow: [`${server.base}/public/*`] } } });
    const ok = await clientInsert(env.client, callFlow(`${server.base}/public/status`));
    const wf = await waitForWorkflow(env.t, ok);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toMatchObject({ status: 200, body: { path: '/public/status' } });
    expectDenied(await errorsFor(env, [`${server.base}/private`, `http://localhost:${server.port}/public/status`]));
    expect(server.requests).toEqual(['/public/status']);
    await env.bystander.assertUndisturbedAndServed();
  });
});
