/**
 * The executor's own accounting of where its wall time went (bench --accounting): the executor
 * runs with `--http PORT` and its Prometheus /metrics is read before and after each scenario.
 * The difference gives the claims (statements or transactions, their total time, the steps they
 * took), the outcome transactions (count, total time, outcomes recorded) and the step attempts
 * (claim to outcome). A diagnostic: the counters cost the executor a little, so such a run's
 * rates are not compared with plain runs.
 */
import net from 'node:net';

/** Summed over label sets: name → value. */
export type MetricSample = Map<string, number>;

const WANTED = [
  'stepd_claim_duration_seconds_sum',
  'stepd_claim_duration_seconds_count',
  'stepd_steps_claimed_total',
  'stepd_outcome_transaction_duration_seconds_sum',
  'stepd_outcome_transaction_duration_seconds_count',
  'stepd_outcomes_recorded_total',
  'stepd_step_duration_seconds_sum',
  'stepd_step_duration_seconds_count',
];

export interface ExecutorAccounting {
  claims: number;
  claimMs: number;
  stepsClaimed: number;
  outcomeTransactions: number;
  outcomeTxMs: number;
  outcomesRecorded: number;
  /** Step attempts that ended (claim to outcome pushed) and their summed time. */
  stepsEnded: number;
  stepMs: number;
}

/** A TCP port free right now on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Pure: the wanted metrics of a Prometheus text exposition, summed over their label sets. */
export function parseMetrics(text: string): MetricSample {
  const out: MetricSample = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-z_]+)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m || !WANTED.includes(m[1]!)) continue;
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

export async function scrapeMetrics(port: number): Promise<MetricSample> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (!res.ok) throw new Error(`GET /metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

export function diffAccounting(before: MetricSample, after: MetricSample): ExecutorAccounting {
  const d = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  return {
    claims: d('stepd_claim_duration_seconds_count'),
    claimMs: d('stepd_claim_duration_seconds_sum') * 1000,
    stepsClaimed: d('stepd_steps_claimed_total'),
    outcomeTransactions: d('stepd_outcome_transaction_duration_seconds_count'),
    outcomeTxMs: d('stepd_outcome_transaction_duration_seconds_sum') * 1000,
    outcomesRecorded: d('stepd_outcomes_recorded_total'),
    stepsEnded: d('stepd_step_duration_seconds_count'),
    stepMs: d('stepd_step_duration_seconds_sum') * 1000,
  };
}
