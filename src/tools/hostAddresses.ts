/**
 * The host's own addresses: every address of every network interface (os.networkInterfaces()),
 * so that `http.request` cannot reach a service of this host that listens on 0.0.0.0 or :: by
 * naming the host's public or private interface address. Interfaces come and go (DHCP, VPNs,
 * containers), so the list is read again when it is older than `maxAgeMs` (one second by
 * default: reading it costs tens of microseconds to a tenth of a millisecond).
 */
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { isIP } from 'node:net';
import { ipv4Forms, parseIpv6, plainAddress } from './specialAddresses.js';

export interface HostAddressesOptions {
  /** The interface list (default: os.networkInterfaces). */
  read?: () => NodeJS.Dict<NetworkInterfaceInfo[]>;
  now?: () => number;
  /** How long one reading is used (default 1000 ms). */
  maxAgeMs?: number;
}

interface Reading {
  at: number;
  v4: Set<bigint>;
  v6: Set<bigint>;
}

export class HostAddresses {
  readonly #read: () => NodeJS.Dict<NetworkInterfaceInfo[]>;
  readonly #now: () => number;
  readonly #maxAgeMs: number;
  #reading: Reading | undefined;

  constructor(options: HostAddressesOptions = {}) {
    this.#read = options.read ?? networkInterfaces;
    this.#now = options.now ?? Date.now;
    this.#maxAgeMs = options.maxAgeMs ?? 1000;
  }

  /** True when `address`, or the IPv4 address it carries (::ffff:a.b.c.d, 6to4, …), is one of this host's. */
  has(address: string): boolean {
    const { v4, v6 } = this.#current();
    const plain = plainAddress(address);
    if (isIP(plain) === 6 && v6.has(parseIpv6(plain))) return true;
    return ipv4Forms(plain).some((n) => v4.has(n));
  }

  #current(): Reading {
    const now = this.#now();
    if (this.#reading && now - this.#reading.at < this.#maxAgeMs) return this.#reading;
    const reading: Reading = { at: now, v4: new Set(), v6: new Set() };
    for (const list of Object.values(this.#read())) {
      for (const info of list ?? []) {
        const plain = plainAddress(info.address);
        if (isIP(plain) === 6) reading.v6.add(parseIpv6(plain));
        for (const n of ipv4Forms(plain)) reading.v4.add(n);
      }
    }
    this.#reading = reading;
    return reading;
  }
}
