/**
 * The egress policy of http.request: which addresses are refused, how allow entries match, and
 * — against real local servers that count every TCP connection — that a refused call never
 * connects, on the first hop or after a redirect, and cannot tell an open port from a closed one.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { freePort } from '../helpers/ports.js';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { classifyAddress, compileUrlPattern, EgressPolicy, type ResolvedAddress } from '../../src/tools/egress.js';
import { HttpToolProvider } from '../../src/tools/httpTool.js';
import type { Connector } from '../../src/tools/httpSend.js';
import { connect } from 'node:net';
import { rejectionOf, stepContext } from './helpers.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

/** A TCP server that counts connections and answers every request with 200 "ok". */
async function countingServer(host = '127.0.0.1'): Promise<{ port: number; connections: () => number }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server: HttpServer = createHttpServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
  server.on('connection', (socket: Socket) => {
    count += 1;
    sockets.add(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as AddressInfo).port, connections: () => count };
}

/** A port nothing listens on. */
const closedPort = freePort;

const resolverFor =
  (table: Record<string, string[]>) =>
  async (host: string): Promise<ResolvedAddress[]> =>
    (table[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

describe('address classification', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.1.2', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::127.0.0.1', 'loopback'],
    ['::a9fe:a9fe', 'metadata'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['2002:7f00:1::', 'loopback'],
    ['[::1]', 'loopback'],
    // The rest of IANA's IPv4 special-purpose registry.
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.254', 'benchmarking'],
    ['192.0.0.9', 'special-purpose'],
    ['192.0.0.171', 'special-purpose'],
    ['192.31.196.1', 'special-purpose'],
    ['192.52.193.1', 'special-purpose'],
    ['192.88.99.1', 'special-purpose'],
    ['192.175.48.1', 'special-purpose'],
    ['240.0.0.1', 'reserved'],
    ['168.63.129.16', 'metadata'],
    // And the IPv6 one, with every IPv4-embedding form decoded.
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['::ffff:0:8.8.8.8', 'special-purpose'],
    ['::ffff:8.8.8.8', 'special-purpose'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::8.8.8.8', 'special-purpose'],
    ['64:ff9b:1:7f00:0:100::', 'loopback'],
    ['64:ff9b:1:808:8:800::', 'private'],
    ['2002:c0a8:101::1', 'private'],
    ['2002:808:808::1', 'special-purpose'],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'loopback'], // Teredo, client 127.0.0.1
    ['2001:0:4136:e378:8000:63bf:3f57:fefe', 'private'], // Teredo, client 192.168.1.1
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', 'special-purpose'], // Teredo, client 8.8.8.8
    ['2001:2::1', 'benchmarking'],
    ['2001:1::1', 'special-purpose'],
    ['2001:20::1', 'special-purpose'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['100::1', 'special-purpose'],
    ['100:0:0:1::1', 'special-purpose'],
    ['2620:4f:8000::1', 'special-purpose'],
    ['5f00::1', 'special-purpose'],
    ['fec0::1', 'private'],
    ['::8.8.8.8', 'reserved'],
    ['4000::1', 'reserved'],
    ['e000::1', 'reserved'],
  ])('refuses %s as %s', (address, reason) => {
    expect(classifyAddress(address)).toBe(reason);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '192.0.3.1', '198.20.0.1', '2606:4700::1111', '2001:4860:4860::8888', '2001:200::1', '3fff:1000::1'])('lets the public address %s through', (address) => {
    expect(classifyAddress(address)).toBeUndefined();
  });
});

describe('allow entries', () => {
  it('match as a prefix, with * standing for any characters', () => {
    const api = compileUrlPattern('https://api.example.com/v1/');
    expect(api.test('https://api.example.com/v1/items?x=1')).toBe(true);
    expect(api.test('https://api.example.com/v2/items')).toBe(false);
    const loop = compileUrlPattern('http://127.0.0.1:*');
    expect(loop.test('http://127.0.0.1:8080/anything')).toBe(true);
    expect(compileUrlPattern('https://*.corp.example/').test('https://a.b.corp.example/x')).toBe(true);
    expect(compileUrlPattern('https://files.example/*/public/').test('https://files.example/a/b/public/x')).toBe(true);
  });

  it('match the whole host, so a look-alike host name cannot borrow an entry', () => {
    expect(compileUrlPattern('https://api.example.com').test('https://api.example.com.evil.test/')).toBe(false);
    expect(compileUrlPattern('http://10.0.0.*').test('http://10.0.0.5.evil.test/')).toBe(false);
    expect(compileUrlPattern('http://10.0.0.*').test('http://10.0.0.5/')).toBe(true);
    expect(compileUrlPattern('http://127.0.0.1:*').test('http://127.0.0.1:80.evil.test/')).toBe(false);
  });

  it('treat regular-expression characters in the entry as plain text', () => {
    const p = compileUrlPattern('http://127.0.0.1:8080/a+b(c)?[d]');
    expect(p.test('http://127.0.0.1:8080/a+b(c)?[d]/x')).toBe(true);
    expect(p.test('http://127.0.0.1:8080/aab')).toBe(false);
    expect(compileUrlPattern('http://127.0.0.1:8080/a.c').test('http://127.0.0.1:8080/abc')).toBe(false);
  });

  it('cover the default port with :* and ignore credentials in the URL', () => {
    const policy = new EgressPolicy({ policy: { allow: ['http://127.0.0.1:*'] } });
    expect(policy.allows(new URL('http://127.0.0.1/x'), null)).toBe(true);
    expect(policy.allows(new URL('http://127.0.0.1:80@evil.test/'), null)).toBe(false);
  });

  it('must be URL patterns', () => {
    expect(() => new EgressPolicy({ policy: { allow: ['127.0.0.1'] } })).toThrow(ConfigError);
  });
});

describe('http.request egress', () => {
  it('refuses loopback in every spelling without opening a connection', async () => {
    const v4 = await countingServer('127.0.0.1');
    const v6 = await countingServer('::1');
    const http = new HttpToolProvider({});
    const urls = [
      `http://127.0.0.1:${v4.port}/`,
      `http://localhost:${v4.port}/`,
      `http://0.0.0.0:${v4.port}/`,
      `http://2130706433:${v4.port}/`,
      `http://[::ffff:127.0.0.1]:${v4.port}/`,
      `http://[::1]:${v6.port}/`,
    ];
    for (const url of urls) {
      const err = await rejectionOf(http.call('request', { url }, stepContext()));
      expect(err, url).toMatchObject({ code: 'egress_denied', retryable: false });
    }
    expect([v4.connections(), v6.connections()]).toEqual([0, 0]);
  });

  it('refuses private, link-local and metadata addresses and names without a connection attempt', async () => {
    // A connector that only counts: a refused request must never get as far as asking for a socket.
    let attempts = 0;
    const counting: Connector = () => {
      attempts += 1;
      throw new Error('no socket may be opened in this test');
    };
    const resolve = resolverFor({ 'intranet.test': ['10.0.0.7'], 'mixed.test': ['93.184.215.14', '192.168.1.20'] });
    const http = new HttpToolProvider({ connect: counting, egress: new EgressPolicy({ resolve }) });
    const urls = [
      'http://10.1.2.3/',
      'http://172.20.0.1:8080/',
      'http://192.168.0.10/',
      'http://100.64.1.1/',
      'http://[fd00::2]/',
      'http://169.254.1.1/',
      'http://[fe80::1]/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00:ec2::254]/',
      'http://metadata.google.internal/computeMetadata/v1/',
      'http://[::ffff:10.0.0.1]/',
      'http://intranet.test/',
      'http://mixed.test/',
      'http://224.0.0.1/',
      'http://255.255.255.255/',
    ];
    for (const url of urls) {
      const err = await rejectionOf(http.call('request', { url }, stepContext()));
      expect(err, url).toMatchObject({ code: 'egress_denied', retryable: false });
    }
    expect(attempts).toBe(0);
  });

  it('answers an open and a closed loopback port alike, so ports cannot be scanned', async () => {
    const open = await countingServer();
    const closed = await closedPort();
    const http = new HttpToolProvider({});
    const a = await rejectionOf(http.call('request', { url: `http://127.0.0.1:${open.port}/` }, stepContext()));
    const b = await rejectionOf(http.call('request', { url: `http://127.0.0.1:${closed}/` }, stepContext()));
    const shape = (e: Record<string, unknown>) => JSON.parse(JSON.stringify({ code: e.code, retryable: e.retryable, message: e.message, details: e.details }).replaceAll(/:\d+\//g, ':PORT/'));
    expect(shape(a)).toEqual(shape(b));
    expect(a.code).toBe('egress_denied');
    expect(open.connections()).toBe(0);
  });

  it('reaches an address an allow entry names', async () => {
    const server = await countingServer();
    const http = new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow: [`http://127.0.0.1:${server.port}/`] } }) });
    const result = await http.call('request', { url: `http://127.0.0.1:${server.port}/hello` }, stepContext());
    expect(result).toMatchObject({ status: 200, body: 'ok' });
    expect(server.connections()).toBe(1);
  });

  it('checks every redirect: an allowed server cannot send the request on to a loopback one', async () => {
    const target = await countingServer();
    const allowed = createHttpServer((_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${target.port}/admin` });
      res.end();
    });
    await new Promise<void>((resolve) => allowed.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => allowed.close(() => resolve())));
    const port = (allowed.address() as AddressInfo).port;
    const http = new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow: [`http://127.0.0.1:${port}/`] } }) });
    const err = await rejectionOf(http.call('request', { url: `http://127.0.0.1:${port}/start` }, stepContext()));
    expect(err).toMatchObject({ code: 'egress_denied', retryable: false, details: { url: `http://127.0.0.1:${target.port}/admin`, reason: 'loopback' } });
    expect(target.connections()).toBe(0);
  });

  it('connects to the address it checked, not to a second DNS answer', async () => {
    const server = await countingServer();
    let lookups = 0;
    // A rebinding resolver: public the first time, loopback afterwards.
    const resolve = async (): Promise<ResolvedAddress[]> => (lookups++ === 0 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }]);
    const seen: string[] = [];
    const recording: Connector = (t) => {
      seen.push(t.address);
      // Sent to the local counting server so no traffic leaves the machine.
      return connect({ host: '127.0.0.1', port: server.port });
    };
    const http = new HttpToolProvider({ connect: recording, egress: new EgressPolicy({ resolve }) });
    const result = await http.call('request', { url: 'http://rebind.test/' }, stepContext());
    expect(result.status).toBe(200);
    expect([lookups, seen]).toEqual([1, ['93.184.215.14']]);
  });

  it('tries the next checked address when the first one does not answer', async () => {
    const server = await countingServer('127.0.0.1');
    const resolve = resolverFor({ 'dual.test': ['::1', '127.0.0.1'] });
    const http = new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow: ['http://dual.test:*'] }, resolve }) });
    expect(await http.call('request', { url: `http://dual.test:${server.port}/` }, stepContext())).toMatchObject({ status: 200, body: 'ok' });
    expect(server.connections()).toBe(1);
  });

  it('times out while the name is still being resolved', async () => {
    const hanging = () => new Promise<ResolvedAddress[]>(() => undefined);
    const http = new HttpToolProvider({ egress: new EgressPolicy({ resolve: hanging }) });
    expect(await rejectionOf(http.call('request', { url: 'http://slow-dns.test/', timeout: '30ms' }, stepContext()))).toMatchObject({ code: 'timeout', retryable: true });
  });

  it("lets a user reach what their own allow list names, and nobody else", async () => {
    const server = await countingServer();
    const policy = new EgressPolicy({ policy: { users: { alice: [`http://127.0.0.1:${server.port}/`] } } });
    const http = new HttpToolProvider({ egress: policy });
    const url = `http://127.0.0.1:${server.port}/`;
    expect(await http.call('request', { url }, stepContext({ user: 'alice' }))).toMatchObject({ status: 200 });
    expect(await rejectionOf(http.call('request', { url }, stepContext({ user: 'bob' })))).toMatchObject({ code: 'egress_denied' });
    expect(await rejectionOf(http.call('request', { url }, stepContext({ user: null })))).toMatchObject({ code: 'egress_denied' });
    expect(server.connections()).toBe(1);
  });

  it.skipIf(!hasOpenssl())('speaks TLS to the checked address, naming and verifying the host, not the address', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stepd-tls-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=secure.test', '-addext', 'subjectAltName=DNS:secure.test', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    const context = createSecureContext({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) });
    const names: string[] = [];
    const server = createHttpsServer({ SNICallback: (name, cb) => (names.push(name), cb(null, context)) }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.address() as AddressInfo).port;
    const resolve = resolverFor({ 'secure.test': ['127.0.0.1'] });
    const http = new HttpToolProvider({ egress: new EgressPolicy({ policy: { allow: ['https://secure.test:*'] }, resolve }) });
    // The certificate is self-signed: verification is on, so the call fails after the handshake.
    const err = await rejectionOf(http.call('request', { url: `https://secure.test:${port}/` }, stepContext()));
    expect(err).toMatchObject({ code: 'http_error', retryable: true });
    expect(err.message).toMatch(/self[- ]signed/);
    expect(names).toEqual(['secure.test']);
  });
});

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
