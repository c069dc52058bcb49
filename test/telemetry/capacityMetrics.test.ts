/**
 * /metrics and the dashboard show steps held back by keys and rates (docs/limits-and-fairness.md):
 * key-blocked steps by key value, throttled steps by rate pattern, and the executor's waits.
 */
import { describe, expect, it } from 'vitest';
import { readCapacityGauges } from '../../src/db/queries/capacity.js';
import { capacityPanel } from '../../src/http/dashboard/capacityPanel.js';
import { silentLogger } from '../../src/logger.js';
import { PromMetrics } from '../../src/telemetry/promMetrics.js';
import { ratePolicy } from '../../src/tools/rates.js';
import { createTestSchema, onCleanup, waitFor } from '../helpers/db.js';
import { randomBytes } from 'node:crypto';
import { createPool } from '../../src/db/connect.js';
import { DEFAULT_EXECUTOR_OPTIONS, Executor } from '../../src/executor/executor.js';
import { CoreTools } from '../../src/tools/builtins.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { parsePromText } from './promText.js';

describe('capacity on /metrics and the dashboard', () => {
  it('shows key-blocked steps by key and throttled steps by rate pattern', async () => {
    const t = await createTestSchema();
    const metrics = new PromMetrics({ processMetrics: false, database: { databaseUrl: t.url, schema: t.schema, log: silentLogger() } });
    onCleanup(() => metrics.close());
    const executor = new Executor(
      { ...DEFAULT_EXECUTOR_OPTIONS, databaseUrl: t.url, schema: t.schema, executorId: `test-${randomBytes(4).toString('hex')}`, concurrency: 8, pollIntervalMs: 50, watchdogIntervalMs: 100 },
      { log: silentLogger(), tools: new ToolRegistry([new CoreTools()]), metrics, rates: ratePolicy({ 'core.echo': '1/h' }) },
    );
    await executor.start();
    onCleanup(() => executor.stop({ graceMs: 0 }));
    const pool = createPool({ url: t.url, schema: t.schema, role: 'client', max: 1 });
    onCleanup(() => pool.end());
    const keyed = { start: 'a', steps: { a: { tool: 'core.sleep', args: { ms: 60_000 }, concurrency: { key: 'acct-{{input.a}}', limit: 1 }, done: true } } };
    const rated = { start: 'a', steps: { a: { tool: 'core.echo', done: true } } };
    await t.q(
      `INSERT INTO stepd.workflows (name, flow, input) SELECT 'k', $1::jsonb, jsonb_build_object('a', 1) FROM generate_series(1, 3)
       UNION ALL SELECT 'r', $2::jsonb, '{}'::jsonb FROM generate_series(1, 4)`,
      [JSON.stringify(keyed), JSON.stringify(rated)],
    );
    // One keyed step runs, two wait; one rated step took the hour's token, three wait.
    const g = await waitFor(async () => {
      const gauges = await readCapacityGauges(pool, 1000);
      return gauges.keyBlocked[0]?.n === 2 && gauges.throttled[0]?.n === 3 ? gauges : undefined;
    }, 'two key-blocked and three throttled steps');
    await waitFor(async () => (parsePromText(await metrics.render()).get('stepd_capacity_waits_total{reason="rate"}') ?? 0) > 0, 'a rate wait counted');
    // Key values are counted per role (sql/0038): the role that wrote the workflows names them.
    const role = (await t.q<{ role: string }>(`SELECT session_user AS role`))[0]!.role;
    expect(g).toEqual({ keyBlocked: [{ key: `${role}/acct-1`, n: 2 }], throttled: [{ bucket: 'core.echo', n: 3 }] });
    const m = parsePromText(await metrics.render());
    expect(m.get(`stepd_steps_key_blocked{key="${role}/acct-1"}`)).toBe(2);
    expect(m.get('stepd_steps_throttled{bucket="core.echo"}')).toBe(3);
    expect(m.has('stepd_capacity_waits_total{reason="key"}')).toBe(true);
    expect(m.get('stepd_capacity_waits_total{reason="rate"}')).toBeGreaterThan(0);
    const panel = String(capacityPanel(g));
    expect(panel).toContain('data-key-blocked="2"');
    expect(panel).toContain('data-throttled="3"');
    expect(panel).toContain('acct-1');
    expect(capacityPanel({ keyBlocked: [], throttled: [] })).toBe('');
  });
});
