/**
 * What /metrics shows of keys and rates (docs/limits-and-fairness.md): ready steps held back by
 * a full concurrency key (by key value, the fullest 20, the rest as key="") and waiting for a
 * rate token (by rate pattern), read from the database at scrape time; and how often this
 * executor's capacity claims left steps waiting, by reason.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { CapacityGauges } from '../db/queries/capacity.js';

export class CapacityMetrics {
  private readonly waits: Counter<'reason'>;
  private readonly keyBlocked: Gauge<'key'>;
  private readonly throttled: Gauge<'bucket'>;

  constructor(registers: Registry[], database: boolean) {
    this.waits = new Counter({ name: 'stepd_capacity_waits_total', help: 'Times a capacity claim of this executor left a ready step waiting, by reason: key (its concurrency key was full), rate (no token yet).', labelNames: ['reason'], registers });
    this.keyBlocked = new Gauge({ name: 'stepd_steps_key_blocked', help: 'Ready steps waiting for a full concurrency key, by key value (the 20 fullest; the rest under key=""), read at scrape time.', labelNames: ['key'], registers: database ? registers : [] });
    this.throttled = new Gauge({ name: 'stepd_steps_throttled', help: 'Ready steps under a rate limit waiting for a token, by rate pattern, read at scrape time.', labelNames: ['bucket'], registers: database ? registers : [] });
    for (const reason of ['key', 'rate']) this.waits.inc({ reason }, 0);
  }

  waited(keyBlocked: number, throttled: number): void {
    if (keyBlocked > 0) this.waits.inc({ reason: 'key' }, keyBlocked);
    if (throttled > 0) this.waits.inc({ reason: 'rate' }, throttled);
  }

  /** The scrape's counts replace the last ones (a key that no longer waits disappears). */
  set(g: CapacityGauges): void {
    this.keyBlocked.reset();
    this.throttled.reset();
    for (const k of g.keyBlocked) this.keyBlocked.set({ key: k.key }, k.n);
    for (const b of g.throttled) this.throttled.set({ bucket: b.bucket }, b.n);
  }
}
