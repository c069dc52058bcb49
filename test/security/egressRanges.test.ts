/**
 * Egress beyond loopback and private networks (issue 20): a client's flow cannot reach the rest
 * of IANA's special-purpose ranges (TEST-NET, benchmarking, CGNAT, …), an IPv4 address hidden in
 * an IPv6 one (IPv4-translated `::ffff:0:a.b.c.d`, Teredo, NAT64, 6to4), nor this machine's own
 * interface address — where every service bound to 0.0.0.0 or :: answers — directly, after a
 * redirect, or through a host name. Each is refused with `egress_denied` before any connection
 * (the servers below count every TCP connection); an `http.allow` entry naming one lets it through.
 */
import { describe, expect, it } from 'vitest';
import { EgressPolicy, type ResolvedAddress } from '../../src/tools/egress.js';
import { HttpToolProvider } from '../../src/tools/httpTool.js';
import { rejectionOf, stepContext } from '../tools/helpers.js';
import { callFlow, errorsFor, expectDenied, ownAddresses } from './egressHelpers.js';
import { clientInsert, securityEnv, startLocalServer, waitForWorkflow, type LocalHttpServer } from './helpers.js';

const own = ownAddresses();
const hostV4 = own.v4[0];

/** A Teredo address (server 65.54.227.120) whose client — the address it leads to — is `ipv4`. */
function teredo(ipv4: string): string {
  const n = ipv4.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
  const inverted = (~n >>> 0).toString(16).padStart(8, '0');
  return `2001:0:4136:e378:8000:63bf:${inverted.slice(0, 4)}:${inverted.slice(4)}`;
}

/** One server on every IPv4 address of this machine (0.0.0.0) and one on every IPv6 address (::). */
async function wildcardServers(handler?: Parameters<typeof startLocalServer>[0]): Promise<{ v4: LocalHttpServer; v6: LocalHttpServer; connections: () => number }> {
  const v4 = await startLocalServer(handler, { host: '0.0.0.0' });
  const v6 = await startLocalServer(handler, { host: '::' });
  return { v4, v6, connections: () => v4.connections() + v6.connections() };
}

describe.skipIf(hostV4 === undefined)('http.request and the special-purpose ranges', () => {
  it("refuses TEST-NET-1, Teredo, ::ffff:0:a.b.c.d and this host's own interface addresses, and never connects to the service on 0.0.0.0", async () => {
    const env = await securityEnv();
    const servers = await wildcardServers();
    const p4 = servers.v4.port;
    const p6 = servers.v6.port;
    const sample = [
      `http://192.0.2.77:${p4}/`,
      `http://[${teredo('127.0.0.1')}]:${p6}/`,
      `http://[::ffff:0:127.0.0.1]:${p4}/`,
      `http://[::ffff:0:${hostV4}]:${p4}/`,
    ];
    const ownUrls = [...own.v4.map((a) => `http://${a}:${p4}/`), ...own.v6.map((a) => `http://[${a}]:${p6}/`)];
    const errors = await errorsFor(env, [...sample, ...ownUrls]);
    expectDenied(errors);
    // The interface address is refused as this host's own, whatever range it is in (here TEST-NET-1).
    for (const e of errors.slice(sample.length)) expect(e.details, e.url).toMatchObject({ reason: 'host-interface' });
    expect(errors[0]!.details).toMatchObject({ reason: 'documentation' });
    expect(errors[1]!.details).toMatchObject({ reason: 'loopback' });
    expect(servers.connections()).toBe(0);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('refuses benchmarking, CGNAT, NAT64 and 6to4 of loopback, and a redirect to any of them or to this host', async () => {
    const servers = await wildcardServers();
    const p4 = servers.v4.port;
    const targets = [`http://198.18.0.1:${p4}/`, `http://100.64.0.1:${p4}/`, `http://[64:ff9b::7f00:1]:${p4}/`, `http://[2002:7f00:1::]:${p4}/`, `http://${hostV4}:${p4}/admin`];
    const redirector = await startLocalServer((req, res) => {
      res.writeHead(302, { location: targets[Number(req.url!.slice(1))]! });
      res.end();
    });
    const env = await securityEnv({ config: { http: { allow: [`${redirector.base}/`] } } });
    const direct = await errorsFor(env, targets.slice(0, 4));
    const redirected = await errorsFor(env, targets.map((_, i) => `${redirector.base}/${i}`));
    expectDenied([...direct, ...redirected]);
    expect(direct.map((e) => e.details?.reason)).toEqual(['benchmarking', 'private', 'loopback', 'loopback']);
    expect(redirected.map((e) => e.details?.url)).toEqual(targets.map((t) => new URL(t).href));
    // The allowed redirector was asked; the targets never were.
    expect(redirector.requests.length).toBe(targets.length);
    expect(servers.connections()).toBe(0);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('refuses a host name that resolves to this host, to NAT64 or Teredo of loopback, or to a public and an own address', async () => {
    const servers = await wildcardServers();
    const table: Record<string, string[]> = {
      'self.test': [hostV4!],
      'nat64.test': ['64:ff9b::7f00:1'],
      'teredo.test': [teredo('127.0.0.1')],
      'mixed.test': ['93.184.215.14', hostV4!],
    };
    // The resolver hook the policy has for tests; the connector is the real one (net.connect).
    const resolve = async (name: string): Promise<ResolvedAddress[]> => (table[name] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    const http = new HttpToolProvider({ egress: new EgressPolicy({ resolve }) });
    for (const name of Object.keys(table)) {
      const err = await rejectionOf(http.call('request', { url: `http://${name}:${servers.v4.port}/` }, stepContext()));
      expect(err, name).toMatchObject({ code: 'egress_denied', retryable: false });
    }
    expect(servers.connections()).toBe(0);
  });

  it('lets through the interface address an http.allow entry names, and nothing beside it', async () => {
    const servers = await wildcardServers((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    });
    const allowed = `http://${hostV4}:${servers.v4.port}/status`;
    const env = await securityEnv({ config: { http: { allow: [allowed] } } });
    const id = await clientInsert(env.client, callFlow(allowed));
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toMatchObject({ status: 200, body: { path: '/status' } });
    expectDenied(await errorsFor(env, [`http://${hostV4}:${servers.v4.port}/admin`, `http://[::ffff:0:${hostV4}]:${servers.v4.port}/status`]));
    expect(servers.v4.requests).toEqual(['/status']);
    expect(servers.connections()).toBe(1);
    await env.bystander.assertUndisturbedAndServed();
  });
});
