/**
 * Retention under a steady load (docs/operations.md, "Retention"): one-step workflows inserted
 * at a steady rate while the executor's watchdog leader deletes completed ones older than
 * `retention.completed` (2 s). The row counts of both tables, printed once a second, level off
 * instead of growing with the number inserted.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EXECUTOR_OPTIONS, Executor } from '../../src/executor/executor.js';
import { silentLogger } from '../../src/logger.js';
import { CoreTools } from '../../src/tools/builtins.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { createTestSchema, onCleanup } from '../helpers/db.js';

const ONE_STEP = JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: { n: '{{input.n}}' }, done: true, output: '{{result}}' } } });
const RETENTION_MS = 2_000;
const PER_TICK = 10;
const TICK_MS = 100;
const SECONDS = 14;

describe('retention under a steady load', () => {
  it('the row counts of workflows and workflow_steps level off', async () => {
    const t = await createTestSchema();
    const executor = new Executor(
      { ...DEFAULT_EXECUTOR_OPTIONS, databaseUrl: t.url, schema: t.schema, executorId: `ret-${randomBytes(4).toString('hex')}`, pollIntervalMs: 50, watchdogIntervalMs: 250, shutdownGraceMs: 2_000 },
      { log: silentLogger(), tools: new ToolRegistry([new CoreTools()]), retention: { completed: RETENTION_MS } },
    );
    await executor.start();
    onCleanup(() => executor.stop({ graceMs: 0 }));

    let inserted = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const started = Date.now();
        await t.q(`INSERT INTO stepd.workflows (name, flow, input) SELECT 'steady', $1, jsonb_build_object('n', g) FROM generate_series(1, $2) g`, [ONE_STEP, PER_TICK]);
        inserted += PER_TICK;
        await new Promise((r) => setTimeout(r, Math.max(0, TICK_MS - (Date.now() - started))));
      }
    })();

    const samples: { s: number; inserted: number; workflows: number; steps: number; completed: number }[] = [];
    for (let s = 1; s <= SECONDS; s++) {
      // A sampling clock, not an assertion on time: the counts are read once a second.
      await new Promise((r) => setTimeout(r, 1_000));
      const [row] = await t.q(`SELECT (SELECT count(*)::int FROM stepd.workflows) AS workflows, (SELECT count(*)::int FROM stepd.workflow_steps) AS steps,
                                      (SELECT count(*)::int FROM stepd.workflows WHERE status = 'completed') AS completed`);
      samples.push({ s, inserted, ...row });
      console.log(`retention steady state: t=${s}s inserted=${inserted} workflows=${row.workflows} workflow_steps=${row.steps} (completed ${row.completed})`);
    }
    stop = true;
    await load;

    const early = samples.slice(4, 8);
    const late = samples.slice(SECONDS - 4);
    const maxEarly = Math.max(...early.map((x) => x.workflows));
    const maxLate = Math.max(...late.map((x) => x.workflows));
    const last = samples[samples.length - 1]!;
    // Everything inserted would be >= `inserted` rows without retention; with it, the tables hold
    // about a retention's worth plus what one sweep lets through, whatever the run's length.
    expect(last.inserted).toBeGreaterThan(400);
    expect(last.workflows).toBeLessThan(last.inserted / 2);
    expect(maxLate).toBeLessThan(maxEarly * 1.5 + 100);
    expect(Math.max(...late.map((x) => x.steps))).toBeLessThan(Math.max(...early.map((x) => x.steps)) * 1.5 + 100);
    // Nothing live was deleted: every workflow still in the table completed or is on its way.
    const lost = await t.q(`SELECT count(*)::int AS n FROM stepd.workflows WHERE status IN ('failed', 'cancelled')`);
    expect(lost[0].n).toBe(0);
  }, 60_000);
});
