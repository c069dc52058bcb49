/** Small statistics over samples: percentiles of one run, median and spread across runs. */

/** Linear-interpolated percentile (p in 0..100) of unsorted samples; NaN when empty. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

export function mean(samples: readonly number[]): number {
  return samples.length === 0 ? Number.NaN : samples.reduce((a, b) => a + b, 0) / samples.length;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** One value per run, in run order. */
  values: number[];
}

/** Median and min–max of one figure across runs (missing runs are left out). */
export function spread(values: readonly (number | undefined)[]): Spread {
  const present = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
  return {
    median: percentile(present, 50),
    min: present.length ? Math.min(...present) : Number.NaN,
    max: present.length ? Math.max(...present) : Number.NaN,
    values: present,
  };
}

/** Latency summary of one run's samples, in the samples' unit. */
export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

export function summarize(samples: readonly number[]): LatencySummary {
  return {
    count: samples.length,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    mean: mean(samples),
    max: samples.length ? Math.max(...samples) : Number.NaN,
  };
}
