/**
 * Where `http.request` may connect. Loopback, unspecified, private, shared (CGNAT), link-local,
 * cloud-metadata, multicast, broadcast and reserved addresses — also written as IPv4-mapped,
 * IPv4-compatible, NAT64 or 6to4 IPv6 — are refused unless an entry of the config's
 * `"http": { "allow": [...] }` (or the user's own list under `http.users`) matches the URL.
 *
 * The check is on the resolved addresses (every address a name resolves to must pass), and the
 * caller connects to exactly the address checked here, so a second DNS answer cannot swap it.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { HttpPolicyConfig } from '../configFile.js';
import { ConfigError, StepError } from '../errors.js';

export type BlockReason = 'loopback' | 'unspecified' | 'private' | 'link-local' | 'metadata' | 'multicast' | 'broadcast' | 'reserved';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has (dns.lookup with `all: true` by default). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The checked place to connect to: `address` is what the socket must connect to. */
export interface EgressTarget {
  url: URL;
  /** The URL's host name without IPv6 brackets (for the Host header, SNI and certificates). */
  hostname: string;
  address: string;
  family: 4 | 6;
  /** Every address the host resolved to, all checked; `address` is the first. */
  addresses: ResolvedAddress[];
  port: number;
  /** True when an allow entry matched (the address may be a private one). */
  allowedByEntry: boolean;
}

/** A refused request: never retried, and it never opened a connection. */
export class EgressDeniedError extends StepError {
  constructor(url: URL, reason: BlockReason) {
    super(
      'egress_denied',
      `${describeUrl(url)} is refused: it reaches a ${REASON_TEXT[reason]} address and no "http.allow" entry of the config names it`,
      { retryable: false, details: { url: describeUrl(url), reason } },
    );
    this.name = 'EgressDeniedError';
  }
}

const REASON_TEXT: Record<BlockReason, string> = {
  loopback: 'loopback',
  unspecified: 'unspecified',
  private: 'private',
  'link-local': 'link-local',
  metadata: 'cloud-metadata',
  multicast: 'multicast',
  broadcast: 'broadcast',
  reserved: 'reserved',
};

/** Host names refused whatever they resolve to. */
const BLOCKED_NAMES = new Set(['metadata.google.internal', 'metadata.goog']);

/** `scheme://host[:port]/path?query` without credentials or fragment. */
export function describeUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}${url.search}`;
}

export interface EgressPolicyOptions {
  policy?: HttpPolicyConfig | undefined;
  /** DNS, injectable for tests (default: dns.lookup, every address, in the resolver's order). */
  resolve?: Resolver;
}

export class EgressPolicy {
  readonly #allow: UrlPattern[];
  readonly #users: Map<string, UrlPattern[]>;
  readonly #resolve: Resolver;

  constructor(options: EgressPolicyOptions = {}) {
    this.#allow = (options.policy?.allow ?? []).map(compileUrlPattern);
    this.#users = new Map(Object.entries(options.policy?.users ?? {}).map(([user, list]) => [user, list.map(compileUrlPattern)]));
    this.#resolve = options.resolve ?? systemResolve;
  }

  /** True when an allow entry (global or `user`'s) matches `url`. */
  allows(url: URL, user: string | null): boolean {
    const candidates = matchForms(url);
    const patterns = [...this.#allow, ...(user === null ? [] : (this.#users.get(user) ?? []))];
    return patterns.some((p) => candidates.some((c) => p.test(c)));
  }

  /**
   * Resolves `url`'s host and checks every address. Throws EgressDeniedError when one is
   * refused and no allow entry matches; DNS failures throw as the resolver does.
   */
  async check(url: URL, user: string | null): Promise<EgressTarget> {
    const hostname = url.hostname.replace(/^\[|\]$/g, '');
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    const allowedByEntry = this.allows(url, user);
    const name = hostname.toLowerCase().replace(/\.$/, '');
    if (!allowedByEntry && BLOCKED_NAMES.has(name)) throw new EgressDeniedError(url, 'metadata');
    const family = isIP(hostname);
    const addresses: ResolvedAddress[] = family === 4 || family === 6 ? [{ address: hostname, family }] : await this.#resolve(hostname);
    if (addresses.length === 0) throw new StepError('http_error', `${describeUrl(url)} failed: ${hostname} has no address`, { retryable: true });
    if (!allowedByEntry) {
      for (const a of addresses) {
        const reason = classifyAddress(a.address);
        if (reason) throw new EgressDeniedError(url, reason);
      }
    }
    const first = addresses[0]!;
    return { url, hostname, address: first.address, family: first.family, addresses, port, allowedByEntry };
  }
}

async function systemResolve(hostname: string): Promise<ResolvedAddress[]> {
  const found = await dnsLookup(hostname, { all: true, order: 'verbatim' });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

// ---------------------------------------------------------------------------------------------
// Allow patterns

export interface UrlPattern {
  source: string;
  test(candidate: string): boolean;
}

/** The forms a URL is matched in: default port left out and written out (`:*` then covers every port). */
export function matchForms(url: URL): string[] {
  const rest = `${url.pathname}${url.search}`;
  const implicit = `${url.protocol}//${url.host}${rest}`;
  if (url.port !== '') return [implicit];
  const port = url.protocol === 'https:' ? 443 : 80;
  return [implicit, `${url.protocol}//${url.host}:${port}${rest}`];
}

/**
 * An allow entry → a prefix matcher. `*` stands for any characters; in the host it matches host
 * characters only (digits only when the host is an IPv4 address pattern, so `http://10.0.0.*`
 * cannot match `http://10.0.0.5.evil.example`), in the port digits only, and the host and port
 * must be matched whole. The user's text is escaped, never read as a regular expression.
 */
export function compileUrlPattern(source: string): UrlPattern {
  if (!/^[a-z*]+:\/\/./i.test(source)) {
    throw new ConfigError('invalid "http" section of the config', [
      { path: 'http.allow', message: `"${source}" must be a URL pattern such as "http://127.0.0.1:*" or "https://api.example.com/v1/"` },
    ]);
  }
  const normalized = normalizePattern(source);
  const sep = normalized.indexOf('://');
  const authorityStart = sep < 0 ? 0 : sep + 3;
  const pathStart = firstIndexOf(normalized, ['/', '?', '#'], authorityStart);
  const scheme = normalized.slice(0, authorityStart).toLowerCase();
  const authority = normalized.slice(authorityStart, pathStart).toLowerCase();
  const rest = normalized.slice(pathStart);

  const bracketEnd = authority.startsWith('[') ? authority.indexOf(']') : -1;
  const portColon = authority.indexOf(':', bracketEnd < 0 ? 0 : bracketEnd);
  const host = portColon < 0 ? authority : authority.slice(0, portColon);
  const port = portColon < 0 ? undefined : authority.slice(portColon + 1);
  const hostWildcard = /^[0-9.*]+$/.test(host) ? '[0-9]*' : host.startsWith('[') ? '[0-9a-f:.]*' : '[^/?#@:]*';

  let regex = `^${wildcard(scheme, '[a-z]*')}${wildcard(host, hostWildcard)}`;
  if (port !== undefined) regex += `:${wildcard(port, '[0-9]*')}`;
  regex += rest === '' ? '(?=[/?#]|$)' : wildcard(rest, '[\\s\\S]*');
  const re = new RegExp(regex);
  return { source, test: (candidate) => re.test(candidate) };
}

/** Patterns without `*` go through the URL parser (case, default port, IPv6 forms) as URLs do. */
function normalizePattern(source: string): string {
  if (source.includes('*')) return source;
  try {
    return matchForms(new URL(source))[0]!;
  } catch {
    return source;
  }
}

function wildcard(text: string, star: string): string {
  return text
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join(star);
}

function firstIndexOf(text: string, chars: string[], from: number): number {
  let best = text.length;
  for (const c of chars) {
    const i = text.indexOf(c, from);
    if (i >= 0 && i < best) best = i;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Address classification

interface Range4 {
  base: number;
  bits: number;
  reason: BlockReason;
}

function v4(text: string): number {
  return text.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

function range4(cidr: string, reason: BlockReason): Range4 {
  const [base, bits] = cidr.split('/');
  return { base: v4(base!), bits: Number(bits), reason };
}

/** Most specific first: the first match names the reason. */
const IPV4_RANGES: Range4[] = [
  range4('169.254.169.254/32', 'metadata'),
  range4('100.100.100.200/32', 'metadata'),
  range4('255.255.255.255/32', 'broadcast'),
  range4('0.0.0.0/8', 'unspecified'),
  range4('10.0.0.0/8', 'private'),
  range4('100.64.0.0/10', 'private'),
  range4('127.0.0.0/8', 'loopback'),
  range4('169.254.0.0/16', 'link-local'),
  range4('172.16.0.0/12', 'private'),
  range4('192.0.0.0/24', 'reserved'),
  range4('192.168.0.0/16', 'private'),
  range4('198.18.0.0/15', 'reserved'),
  range4('224.0.0.0/4', 'multicast'),
  range4('240.0.0.0/4', 'reserved'),
];

/** Why `address` (an IPv4 or IPv6 literal) may not be reached, or undefined when it may. */
export function classifyAddress(address: string): BlockReason | undefined {
  const plain = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(plain);
  if (family === 4) return classify4(v4(plain));
  if (family === 6) return classify6(parse6(plain));
  return 'reserved';
}

function classify4(n: number): BlockReason | undefined {
  for (const r of IPV4_RANGES) {
    const size = 2 ** (32 - r.bits);
    if (Math.floor(n / size) === Math.floor(r.base / size)) return r.reason;
  }
  return undefined;
}

/** The eight 16-bit groups of an IPv6 address (with a dotted IPv4 tail allowed). */
function parse6(text: string): number[] {
  let s = text.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = v4(dotted[1]!);
    s = `${s.slice(0, dotted.index)}${Math.floor(n / 65536).toString(16)}:${(n % 65536).toString(16)}`;
  }
  const [head = '', tail] = s.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? 0 : 8 - left.length - right.length;
  return [...left, ...Array<string>(zeros).fill('0'), ...right].map((g) => parseInt(g, 16));
}

function classify6(g: number[]): BlockReason | undefined {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const embedded4 = g6 * 65536 + g7;
  const upperZero = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  if (upperZero && g5 === 0 && embedded4 === 0) return 'unspecified';
  if (upperZero && g5 === 0 && embedded4 === 1) return 'loopback';
  // IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::a.b.c.d: the IPv4 decides.
  if (upperZero && (g5 === 0xffff || g5 === 0)) return classify4(embedded4) ?? (g5 === 0 ? 'reserved' : undefined);
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return classify4(embedded4);
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return 'private';
  // 6to4 2002:a.b.c.d::/48.
  if (g0 === 0x2002) return classify4(g1 * 65536 + g2);
  if (g0 === 0xfd00 && g1 === 0x0ec2 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0 && g6 === 0 && g7 === 0x254) return 'metadata';
  if ((g0 & 0xfe00) === 0xfc00) return 'private';
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local';
  if ((g0 & 0xffc0) === 0xfec0) return 'private';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return 'reserved';
  return undefined;
}
