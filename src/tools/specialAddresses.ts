/**
 * The addresses `http.request` never reaches on its own: every entry of IANA's IPv4 and IPv6
 * Special-Purpose Address Registries, IPv4 multicast and broadcast, IPv6 multicast and site-local,
 * every IPv6 address outside 2000::/3 (the only space IANA allocates as global unicast), and the
 * cloud-metadata addresses. An IPv6 address that carries an IPv4 address — IPv4-mapped,
 * IPv4-translated, IPv4-compatible, NAT64, 6to4, Teredo — is decoded and the IPv4 address is
 * checked too: the more telling reason (`loopback` rather than `special-purpose`) is reported.
 *
 * Pure tables and functions: the host's own interface addresses are hostAddresses.ts's.
 */
import { isIP } from 'node:net';

export type BlockReason =
  | 'loopback'
  | 'unspecified'
  | 'private'
  | 'link-local'
  | 'metadata'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'benchmarking'
  | 'special-purpose'
  | 'reserved'
  | 'host-interface';

/** How an IPv6 range carries an IPv4 address (RFC 4291, 2765, 6052, 3056, 4380). */
type Embedding = 'low32' | 'nat64-48' | '6to4' | 'teredo';

interface Range {
  cidr: string;
  /** The registry's name for it (for readers of this table and the docs). */
  name: string;
  reason: BlockReason;
  embeds?: Embedding;
}

/** IPv4: IANA IPv4 Special-Purpose Address Registry, plus multicast and the metadata hosts. */
const IPV4: Range[] = [
  { cidr: '0.0.0.0/8', name: '"This network"', reason: 'unspecified' },
  { cidr: '10.0.0.0/8', name: 'Private-Use', reason: 'private' },
  { cidr: '100.64.0.0/10', name: 'Shared Address Space (CGNAT)', reason: 'private' },
  { cidr: '100.100.100.200/32', name: 'Alibaba Cloud metadata', reason: 'metadata' },
  { cidr: '127.0.0.0/8', name: 'Loopback', reason: 'loopback' },
  { cidr: '168.63.129.16/32', name: 'Azure WireServer (host metadata)', reason: 'metadata' },
  { cidr: '169.254.0.0/16', name: 'Link Local', reason: 'link-local' },
  { cidr: '169.254.169.254/32', name: 'cloud metadata', reason: 'metadata' },
  { cidr: '172.16.0.0/12', name: 'Private-Use', reason: 'private' },
  { cidr: '192.0.0.0/24', name: 'IETF Protocol Assignments', reason: 'special-purpose' },
  { cidr: '192.0.0.0/29', name: 'IPv4 Service Continuity Prefix (DS-Lite)', reason: 'special-purpose' },
  { cidr: '192.0.0.8/32', name: 'IPv4 dummy address', reason: 'special-purpose' },
  { cidr: '192.0.0.9/32', name: 'Port Control Protocol Anycast', reason: 'special-purpose' },
  { cidr: '192.0.0.10/32', name: 'Traversal Using Relays around NAT Anycast', reason: 'special-purpose' },
  { cidr: '192.0.0.170/31', name: 'NAT64/DNS64 Discovery', reason: 'special-purpose' },
  { cidr: '192.0.2.0/24', name: 'Documentation (TEST-NET-1)', reason: 'documentation' },
  { cidr: '192.31.196.0/24', name: 'AS112-v4', reason: 'special-purpose' },
  { cidr: '192.52.193.0/24', name: 'AMT', reason: 'special-purpose' },
  { cidr: '192.88.99.0/24', name: 'Deprecated (6to4 Relay Anycast)', reason: 'special-purpose' },
  { cidr: '192.168.0.0/16', name: 'Private-Use', reason: 'private' },
  { cidr: '192.175.48.0/24', name: 'Direct Delegation AS112 Service', reason: 'special-purpose' },
  { cidr: '198.18.0.0/15', name: 'Benchmarking', reason: 'benchmarking' },
  { cidr: '198.51.100.0/24', name: 'Documentation (TEST-NET-2)', reason: 'documentation' },
  { cidr: '203.0.113.0/24', name: 'Documentation (TEST-NET-3)', reason: 'documentation' },
  { cidr: '224.0.0.0/4', name: 'Multicast', reason: 'multicast' },
  { cidr: '240.0.0.0/4', name: 'Reserved', reason: 'reserved' },
  { cidr: '255.255.255.255/32', name: 'Limited Broadcast', reason: 'broadcast' },
];

/** IPv6: IANA IPv6 Special-Purpose Address Registry, plus site-local, multicast and AWS metadata. */
const IPV6: Range[] = [
  { cidr: '::/128', name: 'Unspecified Address', reason: 'unspecified' },
  { cidr: '::1/128', name: 'Loopback Address', reason: 'loopback' },
  { cidr: '::/96', name: 'IPv4-compatible (deprecated)', reason: 'reserved', embeds: 'low32' },
  { cidr: '::ffff:0:0/96', name: 'IPv4-mapped Address', reason: 'special-purpose', embeds: 'low32' },
  { cidr: '::ffff:0:0:0/96', name: 'IPv4-translated Address', reason: 'special-purpose', embeds: 'low32' },
  { cidr: '64:ff9b::/96', name: 'IPv4-IPv6 Translation (NAT64)', reason: 'special-purpose', embeds: 'low32' },
  { cidr: '64:ff9b:1::/48', name: 'Local-Use IPv4/IPv6 Translation', reason: 'private', embeds: 'nat64-48' },
  { cidr: '100::/64', name: 'Discard-Only Address Block', reason: 'special-purpose' },
  { cidr: '100:0:0:1::/64', name: 'Dummy IPv6 Prefix', reason: 'special-purpose' },
  { cidr: '2001::/23', name: 'IETF Protocol Assignments', reason: 'special-purpose' },
  { cidr: '2001::/32', name: 'TEREDO', reason: 'special-purpose', embeds: 'teredo' },
  { cidr: '2001:1::1/128', name: 'Port Control Protocol Anycast', reason: 'special-purpose' },
  { cidr: '2001:1::2/128', name: 'Traversal Using Relays around NAT Anycast', reason: 'special-purpose' },
  { cidr: '2001:1::3/128', name: 'DNS-SD Service Registration Protocol Anycast', reason: 'special-purpose' },
  { cidr: '2001:2::/48', name: 'Benchmarking', reason: 'benchmarking' },
  { cidr: '2001:3::/32', name: 'AMT', reason: 'special-purpose' },
  { cidr: '2001:4:112::/48', name: 'AS112-v6', reason: 'special-purpose' },
  { cidr: '2001:10::/28', name: 'Deprecated (previously ORCHID)', reason: 'special-purpose' },
  { cidr: '2001:20::/28', name: 'ORCHIDv2', reason: 'special-purpose' },
  { cidr: '2001:30::/28', name: 'Drone Remote ID Protocol Entity Tags (DETs) Prefix', reason: 'special-purpose' },
  { cidr: '2001:db8::/32', name: 'Documentation', reason: 'documentation' },
  { cidr: '2002::/16', name: '6to4', reason: 'special-purpose', embeds: '6to4' },
  { cidr: '2620:4f:8000::/48', name: 'Direct Delegation AS112 Service', reason: 'special-purpose' },
  { cidr: '3fff::/20', name: 'Documentation', reason: 'documentation' },
  { cidr: '5f00::/16', name: 'Segment Routing (SRv6) SIDs', reason: 'special-purpose' },
  { cidr: 'fc00::/7', name: 'Unique-Local', reason: 'private' },
  { cidr: 'fd00:ec2::254/128', name: 'AWS instance metadata', reason: 'metadata' },
  { cidr: 'fe80::/10', name: 'Link-Local Unicast', reason: 'link-local' },
  { cidr: 'fec0::/10', name: 'Site-Local (deprecated)', reason: 'private' },
  { cidr: 'ff00::/8', name: 'Multicast', reason: 'multicast' },
];

/** 2000::/3, the IPv6 global unicast space (IANA IPv6 Address Space registry): everything outside is reserved. */
const isGlobalUnicast = (value: bigint): boolean => value >> 125n === 1n;

interface Compiled {
  bits: number;
  base: bigint;
  range: Range;
}

/** Longest prefix first, so the first match is the most specific entry. */
function compile(ranges: Range[], parse: (text: string) => bigint, width: number): Compiled[] {
  return ranges
    .map((range) => {
      const [base, bits] = range.cidr.split('/');
      return { bits: Number(bits), base: parse(base!) >> BigInt(width - Number(bits)), range };
    })
    .sort((a, b) => b.bits - a.bits);
}

const V4_TABLE = compile(IPV4, parseIpv4, 32);
const V6_TABLE = compile(IPV6, parseIpv6, 128);

function lookup(table: Compiled[], value: bigint, width: number): Range | undefined {
  return table.find((c) => value >> BigInt(width - c.bits) === c.base)?.range;
}

/** Why `address` (an IPv4 or IPv6 literal, brackets and zone allowed) may not be reached, or undefined when it may. */
export function classifyAddress(address: string): BlockReason | undefined {
  const plain = plainAddress(address);
  const family = isIP(plain);
  if (family === 4) return lookup(V4_TABLE, parseIpv4(plain), 32)?.reason;
  if (family !== 6) return 'reserved';
  const value = parseIpv6(plain);
  const range = lookup(V6_TABLE, value, 128);
  if (range === undefined) return isGlobalUnicast(value) ? undefined : 'reserved';
  for (const v4 of embedded(value, range.embeds)) {
    const inner = lookup(V4_TABLE, v4, 32)?.reason;
    if (inner !== undefined) return inner;
  }
  return range.reason;
}

/**
 * The IPv4 addresses (as numbers) an address stands for: itself when it is IPv4, the one an
 * IPv4-embedding IPv6 address carries (both for Teredo: client and server), none otherwise.
 */
export function ipv4Forms(address: string): bigint[] {
  const plain = plainAddress(address);
  const family = isIP(plain);
  if (family === 4) return [parseIpv4(plain)];
  if (family !== 6) return [];
  const value = parseIpv6(plain);
  return embedded(value, lookup(V6_TABLE, value, 128)?.embeds);
}

function embedded(value: bigint, how: Embedding | undefined): bigint[] {
  const bitsAt = (from: number, count: number) => (value >> BigInt(128 - from - count)) & ((1n << BigInt(count)) - 1n);
  switch (how) {
    case 'low32':
      return [bitsAt(96, 32)];
    case 'nat64-48':
      // RFC 6052 /48: bits 48–63 and 72–87 hold the IPv4 address (bits 64–71 are the zero "u" octet).
      return [(bitsAt(48, 16) << 16n) | bitsAt(72, 16)];
    case '6to4':
      return [bitsAt(16, 32)];
    case 'teredo':
      // Bits 96–127: the client's address, inverted (where the packets go); bits 32–63: the Teredo server.
      return [bitsAt(96, 32) ^ 0xffffffffn, bitsAt(32, 32)];
    default:
      return [];
  }
}

/** Brackets and an IPv6 zone (`%eth0`) removed. */
export function plainAddress(address: string): string {
  return address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
}

/** A dotted-quad IPv4 address as a number. */
export function parseIpv4(text: string): bigint {
  return text.split('.').reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n);
}

/** An IPv6 address (a dotted IPv4 tail allowed) as a 128-bit number. */
export function parseIpv6(text: string): bigint {
  let s = text.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = parseIpv4(dotted[1]!);
    s = `${s.slice(0, dotted.index)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = s.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? 0 : 8 - left.length - right.length;
  return [...left, ...Array<string>(zeros).fill('0'), ...right].reduce((n, group) => (n << 16n) | BigInt(parseInt(group, 16)), 0n);
}
