/**
 * Whether a request reached the browser over TLS. Directly: the connection is TLS. Behind a
 * reverse proxy that ends TLS: the proxy says so with `X-Forwarded-Proto: https`, which counts
 * only when the connection comes from an address the operator lists in `api.trustProxy` (any
 * client can send the header; only a trusted proxy's word is taken). Cookies are `Secure` and
 * the same-origin check expects `https://` origins exactly when this says https.
 */
import { BlockList, isIP } from 'node:net';
import { z } from 'zod';

/** `api.trustProxy`: addresses (`10.0.0.5`, `::1`) or CIDR ranges (`10.0.0.0/8`, `fd00::/8`). */
export const trustProxySchema = z.array(
  z.string().refine((entry) => parseEntry(entry) !== undefined, 'must be an IP address or a CIDR range, like "10.0.0.5" or "10.0.0.0/8"'),
);

export class TrustedProxies {
  readonly #list = new BlockList();
  readonly size: number;

  /** Entries already validated by trustProxySchema (an invalid one throws). */
  constructor(entries: readonly string[] = []) {
    for (const entry of entries) {
      const parsed = parseEntry(entry);
      if (!parsed) throw new TypeError(`not an IP address or CIDR range: ${JSON.stringify(entry)}`);
      if (parsed.prefix === undefined) this.#list.addAddress(parsed.address, parsed.family);
      else this.#list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
    this.size = entries.length;
  }

  /** Whether the peer at `address` (the socket's remote address) is a listed proxy. */
  trusts(address: string | undefined): boolean {
    if (!address || this.size === 0) return false;
    const plain = unmapped(address);
    const family = isIP(plain);
    return family !== 0 && this.#list.check(plain, family === 4 ? 'ipv4' : 'ipv6');
  }

  /**
   * Whether the browser's request was https: a TLS connection, or `X-Forwarded-Proto: https`
   * (its last value, the one the nearest proxy set) from a trusted proxy.
   */
  isHttps(request: { encrypted: boolean; remoteAddress: string | undefined; forwardedProto: string | undefined }): boolean {
    if (request.encrypted) return true;
    if (request.forwardedProto === undefined || !this.trusts(request.remoteAddress)) return false;
    const last = request.forwardedProto.split(',').pop()?.trim().toLowerCase();
    return last === 'https';
  }
}

function parseEntry(entry: string): { address: string; prefix?: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', prefixText, extra] = entry.trim().split('/');
  if (extra !== undefined) return undefined;
  const plain = unmapped(address);
  const version = isIP(plain);
  if (version === 0) return undefined;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  if (prefixText === undefined) return { address: plain, family };
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > (version === 4 ? 32 : 128)) return undefined;
  return { address: plain, prefix, family };
}

/** `::ffff:10.0.0.5` (how a dual-stack socket shows an IPv4 peer) → `10.0.0.5`. */
function unmapped(address: string): string {
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return m ? m[1]! : address;
}
