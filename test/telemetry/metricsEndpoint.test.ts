/**
 * /metrics of `stepd start --http 0` as a user runs it (the built CLI, a real socket): the
 * Prometheus text moves when workflows run — steps finished by tool and outcome, retries,
 * durations, claim and outcome-transaction latency, workflows by status from the database.
 */
import { describe, expect, it } from 'vitest';
import { spawnCli, envFor } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, waitFor, waitForWorkflow } from '../helpers/db.js';
import { parsePromText } from './promText.js';

const READY = /metrics at (http:\/\/\S+)\/metrics/;

async function scrape(base: string): Promise<Map<string, number>> {
  const res = await fetch(`${base}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePromText(await res.text());
}

describe('GET /metrics on the daemon', () => {
  it('counts the steps, retries and workflows of the workflows that ran', async () => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--poll-interval', '100ms'], { env: envFor(t) });
    const base = (await daemon.waitFor(READY))[1]!;

    const before = await scrape(base);
    expect(before.get('stepd_metrics_database_up')).toBe(1);
    expect(before.get('stepd_workflows{status="completed"}')).toBe(0);
    expect(before.get('stepd_steps_in_flight')).toBe(0);
    expect(before.get('stepd_watchdog_rescues_total{reason="executor_dead"}')).toBe(0);
    expect(before.has('stepd_steps_finished_total{tool="core.echo",outcome="done"}')).toBe(false);

    const ok = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { n: 1 }, next: 'b' }, b: { tool: 'core.echo', args: { n: 2 } } } });
    const flaky = await insertWorkflow(t, {
      start: 'f',
      steps: { f: { tool: 'core.fail', args: { message: 'nope', retryable: true }, retry: { maxAttempts: 2, initial: '10ms', jitter: false } } },
    });
    await waitForWorkflow(t, ok, ['completed']);
    await waitForWorkflow(t, flaky, ['failed']);

    const after = await waitFor(async () => {
      const m = await scrape(base);
      return m.get('stepd_steps_finished_total{tool="core.fail",outcome="failed"}') === 2 && m.get('stepd_workflows{status="failed"}') === 1 ? m : undefined;
    }, 'the metrics of both workflows');
    expect(after.get('stepd_steps_finished_total{tool="core.echo",outcome="done"}')).toBe(2);
    expect(after.get('stepd_step_retries_total{tool="core.fail"}')).toBe(1);
    expect(after.get('stepd_step_duration_seconds_count{tool="core.echo"}')).toBe(2);
    expect(after.get('stepd_step_duration_seconds_bucket{le="+Inf",tool="core.echo"}')).toBe(2);
    expect(after.get('stepd_workflows{status="completed"}')).toBe(1);
    expect(after.get('stepd_ready_steps')).toBe(0);
    expect(after.get('stepd_oldest_ready_step_age_seconds')).toBe(0);
    expect(after.get('stepd_steps_in_flight')).toBe(0);
    expect(after.get('stepd_claim_duration_seconds_count')).toBeGreaterThan(0);
    expect(after.get('stepd_outcome_transaction_duration_seconds_count')).toBeGreaterThan(0);
    expect(after.get('stepd_outcomes_recorded_total')).toBe(4);
    // Process metrics of the daemon itself.
    expect(after.get('process_resident_memory_bytes')).toBeGreaterThan(0);

    const { code } = await daemon.kill('SIGTERM');
    expect(code).toBe(0);
  });
});
