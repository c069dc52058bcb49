/**
 * Where `http.request` may connect. Every IANA special-purpose address (loopback, private,
 * link-local, documentation, benchmarking, …; specialAddresses.ts), cloud-metadata, multicast and
 * broadcast addresses — also when carried in an IPv6 address (IPv4-mapped, NAT64, 6to4, Teredo…)
 * — and every address of the host's own interfaces (hostAddresses.ts) are refused unless an
 * entry of the config's `"http": { "allow": [...] }` (or the user's own list under `http.users`)
 * matches the URL.
 *
 * The check is on the resolved addresses (every address a name resolves to must pass), and the
 * caller connects to exactly the address checked here, so a second DNS answer cannot swap it.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { HttpPolicyConfig } from '../configFile.js';
import { ConfigError, StepError } from '../errors.js';
import { HostAddresses } from './hostAddresses.js';
import { classifyAddress, type BlockReason } from './specialAddresses.js';

export { classifyAddress, type BlockReason } from './specialAddresses.js';

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
      `${describeUrl(url)} is refused: it reaches ${REASON_TEXT[reason]} and no "http.allow" entry of the config names it`,
      { retryable: false, details: { url: describeUrl(url), reason } },
    );
    this.name = 'EgressDeniedError';
  }
}

const REASON_TEXT: Record<BlockReason, string> = {
  loopback: 'a loopback address',
  unspecified: 'an unspecified address',
  private: 'a private address',
  'link-local': 'a link-local address',
  metadata: 'a cloud-metadata address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  documentation: 'a documentation address',
  benchmarking: 'a benchmarking address',
  'special-purpose': 'a special-purpose address',
  reserved: 'a reserved address',
  'host-interface': "an address of this host's own network interfaces",
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
  /** The host's own addresses (default: os.networkInterfaces(), read again every second). */
  hostAddresses?: HostAddresses;
}

export class EgressPolicy {
  readonly #allow: UrlPattern[];
  readonly #users: Map<string, UrlPattern[]>;
  readonly #resolve: Resolver;
  readonly #host: HostAddresses;

  constructor(options: EgressPolicyOptions = {}) {
    this.#allow = (options.policy?.allow ?? []).map(compileUrlPattern);
    this.#users = new Map(Object.entries(options.policy?.users ?? {}).map(([user, list]) => [user, list.map(compileUrlPattern)]));
    this.#resolve = options.resolve ?? systemResolve;
    this.#host = options.hostAddresses ?? new HostAddresses();
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
        const reason = this.#reasonToRefuse(a.address);
        if (reason) throw new EgressDeniedError(url, reason);
      }
    }
    const first = addresses[0]!;
    return { url, hostname, address: first.address, family: first.family, addresses, port, allowedByEntry };
  }

  /** The range's reason; an address of this host's interfaces is `host-interface` (loopback stays `loopback`). */
  #reasonToRefuse(address: string): BlockReason | undefined {
    const reason = classifyAddress(address);
    if (reason === 'loopback') return reason;
    return this.#host.has(address) ? 'host-interface' : reason;
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
