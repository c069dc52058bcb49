/**
 * prom-client's default metrics include gauges named `*_total` (nodejs_active_handles_total,
 * nodejs_active_requests_total, nodejs_active_resources_total). The Prometheus naming rules keep
 * `_total` for counters, and `promtool check metrics` refuses them, so they are not registered:
 * the same numbers, by type, stay in nodejs_active_handles, nodejs_active_requests and
 * nodejs_active_resources.
 */
import { Counter, type Registry } from 'prom-client';

/** Removes every metric named `*_total` that is not a counter; returns the names removed. */
export function withoutMisnamedGauges(registry: Registry): string[] {
  const removed: string[] = [];
  for (const metric of registry.getMetricsAsArray()) {
    const name = (metric as unknown as { name: string }).name;
    if (name.endsWith('_total') && !(metric instanceof Counter)) {
      registry.removeSingleMetric(name);
      removed.push(name);
    }
  }
  return removed;
}
