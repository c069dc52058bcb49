/**
 * PromMetrics in-process: the ready queue and workflow gauges read from the database at scrape
 * time (capped), a scrape that the database cannot answer in time, and tool labels bounded
 * whatever tool names flows bring.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EXECUTOR_OPTIONS, Executor } from '../../src/executor/executor.js';
import { silentLogger } from '../../src/logger.js';
import { PromMetrics } from '../../src/telemetry/promMetrics.js';
import { tracesExporters } from '../../src/telemetry/tracingFromEnv.js';
import { CoreTools } from '../../src/tools/builtins.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { createTestSchema, insertWorkflow, onCleanup, waitFor, type TestSchema } from '../helpers/db.js';
import { parsePromText } from './promText.js';

function metricsOn(t: TestSchema, database: { timeoutMs?: number; caps?: { live: number; finished: number } } = {}): PromMetrics {
  const metrics = new PromMetrics({ processMetrics: false, database: { databaseUrl: t.url, schema: t.schema, log: silentLogger(), ...database } });
  onCleanup(() => metrics.close());
  return metrics;
}

async function values(metrics: PromMetrics): Promise<Map<string, number>> {
  return parsePromText(await metrics.render());
}

describe('PromMetrics', () => {
  it('reads the ready queue, its oldest step and the workflows by status from the database, each count capped', async () => {
    const t = await createTestSchema();
    const metrics = metricsOn(t);
    const executor = new Executor(
      { ...DEFAULT_EXECUTOR_OPTIONS, databaseUrl: t.url, schema: t.schema, executorId: `test-${randomBytes(4).toString('hex')}`, concurrency: 1, pollIntervalMs: 50, watchdogIntervalMs: 100 },
      { log: silentLogger(), tools: new ToolRegistry([new CoreTools()]), metrics },
    );
    await executor.start();
    onCleanup(() => executor.stop({ graceMs: 0 }));
    // One slot, held by a long step: the first steps of the next workflows (slot-bound tools, not
    // instant ones like core.echo) wait ready.
    await insertWorkflow(t, { start: 's', steps: { s: { tool: 'core.sleep', args: { ms: 60_000 } } } });
    await waitFor(() => executor.runningCount === 1, 'the long step to run');
    // Four: a claim prefetches one beyond the free slots (it waits, claimed, in the executor).
    for (let i = 0; i < 4; i++) await insertWorkflow(t, { start: 'e', steps: { e: { tool: 'core.sleep', args: { ms: 1 } } } });
    await waitFor(async () => (await t.q(`SELECT 1 FROM ${t.schema}.workflow_steps WHERE status = 'ready'`)).length === 3, 'three ready steps');
    await insertWorkflow(t, { start: 'e', steps: { e: { tool: 'core.sleep', args: { ms: 1 } } } });

    const m = await values(metrics);
    expect(m.get('stepd_metrics_database_up')).toBe(1);
    expect(m.get('stepd_ready_steps')).toBeGreaterThanOrEqual(3);
    expect(m.get('stepd_oldest_ready_step_age_seconds')).toBeGreaterThan(0);
    expect(m.get('stepd_steps_in_flight')).toBe(1);
    expect(m.get('stepd_workflows{status="running"}')! + m.get('stepd_workflows{status="new"}')!).toBe(6);
    expect(m.get('stepd_workflows{status="completed"}')).toBe(0);

    const capped = await values(metricsOn(t, { caps: { live: 2, finished: 2 } }));
    expect(capped.get('stepd_ready_steps')).toBe(2);
    expect(capped.get('stepd_workflows{status="running"}')).toBe(2);
  });

  it('answers within its time box while the database cannot (stepd_metrics_database_up 0), and reads it again once it can', async () => {
    const t = await createTestSchema();
    const metrics = metricsOn(t, { timeoutMs: 300 });
    expect((await values(metrics)).get('stepd_metrics_database_up')).toBe(1);
    const locker = new pg.Client({ connectionString: t.url });
    await locker.connect();
    onCleanup(() => locker.end());
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${t.schema}.workflows IN ACCESS EXCLUSIVE MODE`);
    const blocked = await values(metrics);
    expect(blocked.get('stepd_metrics_database_up')).toBe(0);
    // The gauges keep their last values; the executor's own metrics are served as ever.
    expect(blocked.get('stepd_workflows{status="running"}')).toBe(0);
    expect(blocked.has('stepd_steps_in_flight')).toBe(true);
    await locker.query('ROLLBACK');
    await waitFor(async () => (await values(metrics)).get('stepd_metrics_database_up') === 1, 'the gauges to be read again');
  });

  it('gives the first tool names a label each and counts later ones as "other"', async () => {
    const metrics = new PromMetrics({ maxTools: 3, processMetrics: false });
    for (const tool of ['a.x', 'b.x', 'c.x', 'd.x', 'e.x', 'a.x', null]) {
      metrics.stepStarted(tool, 2);
      metrics.stepEnded(tool, 0.01, 'done');
    }
    metrics.stepStarted('x'.repeat(500), 1);
    metrics.stepEnded('x'.repeat(500), 0.01, 'failed');
    const m = parsePromText(await metrics.render());
    const finished = [...m].filter(([k]) => k.startsWith('stepd_steps_finished_total{')).map(([k, v]) => [k.replace('stepd_steps_finished_total', ''), v]);
    expect(Object.fromEntries(finished)).toEqual({
      '{tool="a.x",outcome="done"}': 2,
      '{tool="b.x",outcome="done"}': 1,
      '{tool="c.x",outcome="done"}': 1,
      '{tool="other",outcome="done"}': 2,
      '{tool="none",outcome="done"}': 1,
      '{tool="other",outcome="failed"}': 1,
    });
    expect(m.get('stepd_step_retries_total{tool="other"}')).toBe(2);
    // Steps without a tool are counted but have no duration.
    expect(m.has('stepd_step_duration_seconds_count{tool="none"}')).toBe(false);
    expect(m.get('stepd_steps_in_flight')).toBe(0);
    // No database configured: no database gauges at all.
    expect(m.has('stepd_metrics_database_up')).toBe(false);
  });
});

describe('tracing from OTEL_* variables', () => {
  it('is on only when an exporter or an OTLP endpoint is configured, and off with none or OTEL_SDK_DISABLED', () => {
    expect(tracesExporters({})).toEqual([]);
    expect(tracesExporters({ OTEL_SERVICE_NAME: 'x' })).toEqual([]);
    expect(tracesExporters({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual(['otlp']);
    expect(tracesExporters({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toEqual(['otlp']);
    expect(tracesExporters({ OTEL_TRACES_EXPORTER: 'otlp, console' })).toEqual(['otlp', 'console']);
    expect(tracesExporters({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual([]);
    expect(tracesExporters({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' })).toEqual([]);
  });
});
