/**
 * The host's own interface addresses are refused like special-purpose ones, in every IPv6 form
 * that carries them, unless an allow entry names them; the interface list is read again once it
 * is older than its maximum age, and not on every check.
 */
import type { NetworkInterfaceInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { EgressPolicy } from '../../src/tools/egress.js';
import { HostAddresses } from '../../src/tools/hostAddresses.js';
import { rejectionOf } from './helpers.js';

/** An interface list as os.networkInterfaces() returns it, with these (public) addresses on eth0. */
function interfaces(addresses: string[]): NodeJS.Dict<NetworkInterfaceInfo[]> {
  return {
    lo: [{ address: '127.0.0.1', netmask: '255.0.0.0', family: 'IPv4', mac: '00:00:00:00:00:00', internal: true, cidr: '127.0.0.1/8' }],
    eth0: addresses.map((address) =>
      address.includes(':')
        ? { address, netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', mac: '02:00:00:00:00:01', internal: false, cidr: `${address}/64`, scopeid: 0 }
        : { address, netmask: '255.255.255.0', family: 'IPv4', mac: '02:00:00:00:00:01', internal: false, cidr: `${address}/24` },
    ),
  };
}

describe("the host's own addresses", () => {
  it('refuses a public address of an interface, also written as IPv4-mapped, NAT64 or 6to4, as host-interface', async () => {
    const host = new HostAddresses({ read: () => interfaces(['93.184.215.14', '2606:2800:220:1::2']) });
    const policy = new EgressPolicy({ hostAddresses: host });
    for (const url of ['http://93.184.215.14:8080/', 'http://[::ffff:93.184.215.14]/', 'http://[64:ff9b::5db8:d70e]/', 'http://[2002:5db8:d70e::1]/', 'http://[2606:2800:220:1::2]/']) {
      expect(await rejectionOf(policy.check(new URL(url), null)), url).toMatchObject({ code: 'egress_denied', details: { reason: 'host-interface' } });
    }
    // Loopback keeps its own reason; another public address passes.
    expect(await rejectionOf(policy.check(new URL('http://127.0.0.1/'), null))).toMatchObject({ details: { reason: 'loopback' } });
    expect((await policy.check(new URL('http://93.184.215.15/'), null)).address).toBe('93.184.215.15');
  });

  it('lets through an interface address that an allow entry names', async () => {
    const host = new HostAddresses({ read: () => interfaces(['93.184.215.14']) });
    const policy = new EgressPolicy({ hostAddresses: host, policy: { allow: ['http://93.184.215.14:8080/'] } });
    expect(await policy.check(new URL('http://93.184.215.14:8080/status'), null)).toMatchObject({ address: '93.184.215.14', allowedByEntry: true });
    expect(await rejectionOf(policy.check(new URL('http://93.184.215.14:9090/'), null))).toMatchObject({ code: 'egress_denied' });
  });

  it('reads the interfaces again once the last reading is older than its maximum age, not on every check', () => {
    let now = 0;
    let reads = 0;
    let current = ['93.184.215.14'];
    const host = new HostAddresses({ read: () => (reads++, interfaces(current)), now: () => now, maxAgeMs: 1000 });
    for (let i = 0; i < 100; i++) expect(host.has('93.184.215.14')).toBe(true);
    expect(reads).toBe(1);
    current = ['198.51.100.1', '203.0.113.77'];
    now = 1000;
    expect([host.has('203.0.113.77'), host.has('93.184.215.14')]).toEqual([true, false]);
    expect(reads).toBe(2);
  });

  it('reads the real interfaces by default: every address of this machine is one of its own', async () => {
    const { networkInterfaces } = await import('node:os');
    const host = new HostAddresses();
    const all = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    expect(all.length).toBeGreaterThan(0);
    for (const address of all) expect(host.has(address), address).toBe(true);
  });
});
