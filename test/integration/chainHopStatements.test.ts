/**
 * What a chain's hop costs the server beyond its two statements (finish a step, insert the next),
 * two of the three things issue 27 found it paying (docs/performance.md, "The chain hop"):
 * - the next step's insert joined its first-attempt lookup to every step row of a young table;
 * - guard triggers' WHEN clauses inlined stepd_is_executor() (parsed anew per statement).
 * The third, the lock-and-finish statement re-planned at every call, is paid on purpose: plans
 * made once per connection were withdrawn (and their option removed), so nothing checks it here.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPool, withTransaction } from '../../src/db/connect.js';
import { insertSteps } from '../../src/db/queries.js';
import { asExecutor, createTestSchema, onCleanup } from '../helpers/db.js';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'One-Time Filter'?: string;
  Plans?: PlanNode[];
}

const flatten = (p: PlanNode): PlanNode[] => [p, ...(p.Plans ?? []).flatMap(flatten)];

describe("a chain's hop", () => {
  it('inserts a first attempt without scanning the step rows, with statistics from a young table', async () => {
    const t = await createTestSchema();
    await t.q(`ALTER TABLE stepd.workflow_steps SET (autovacuum_enabled = false)`);
    const [wf] = await asExecutor(
      t,
      `INSERT INTO stepd.workflows (name, flow, input, created_by, status, started_at)
       VALUES ('chain', '{"start":"a","steps":{"a":{"tool":"core.noop","done":true}}}', '{}', 'test', 'running', now()) RETURNING id::text`,
    );
    await asExecutor(
      t,
      `INSERT INTO stepd.workflow_steps (workflow_id, name, tool, status, attempt, started_at, completed_at, result)
       SELECT $1::bigint, 's' || g, 'core.noop', 'done', 1, now(), now(), '{}' FROM generate_series(1, $2::int) g`,
      [wf!.id, 100],
    );
    // Statistics from a young table (as autovacuum leaves them early in a run), then many more rows.
    await t.q(`ANALYZE stepd.workflow_steps`);
    await asExecutor(
      t,
      `INSERT INTO stepd.workflow_steps (workflow_id, name, tool, status, attempt, started_at, completed_at, result)
       SELECT $1::bigint, 't' || g, 'core.noop', 'done', 1, now(), now(), '{}' FROM generate_series(1, $2::int) g`,
      [wf!.id, 2000],
    );
    const pool = createPool({ url: t.url, schema: t.schema, role: 'executor', max: 1 });
    onCleanup(() => pool.end());

    const plans: PlanNode[] = [];
    await withTransaction(pool, async (client: pg.PoolClient) => {
      client.on('notice', (n: { message?: string }) => {
        const text = n.message ?? '';
        if (text.startsWith('duration') && text.includes('{')) plans.push((JSON.parse(text.slice(text.indexOf('{'))) as { Plan: PlanNode }).Plan);
      });
      await client.query(`LOAD 'auto_explain'`);
      for (const s of ['log_min_duration = 0', "log_format = 'json'", 'log_analyze = on', 'log_timing = off', "log_level = 'notice'"]) {
        await client.query(`SET LOCAL auto_explain.${s}`);
      }
      await client.query(`SET LOCAL client_min_messages = 'notice'`);
      await insertSteps(client, [{ workflowId: wf!.id, name: 'next', tool: 'core.noop', args: {}, status: 'ready', attempt: 1, fanoutId: null, itemIndex: null }]);
    }, { preferIndexScans: true });

    const reads = plans
      .flatMap(flatten)
      .filter((n) => n['Node Type'].includes('Scan') && (n['Relation Name'] === 'workflow_steps' || n['Index Name']?.startsWith('workflow_steps_')))
      .filter((n) => (n['Actual Loops'] ?? 0) > 0)
      .map((n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name']}: ${n['Actual Rows']} rows`);
    expect(plans.length).toBeGreaterThan(0);
    // Not even started: a join (hash or merge) to the step rows would scan them; the probe never runs.
    expect(reads).toEqual([]);
    // And by construction, not by the planner's estimate of the day: the lookup is gated per row.
    expect(plans.flatMap(flatten).some((n) => n['One-Time Filter']?.includes('first_attempt_id IS NOT NULL'))).toBe(true);
  });

  it('meets no guard trigger whose WHEN calls a SQL function (compiled per statement); the guards still name the executor role', async () => {
    const t = await createTestSchema();
    const defs = await t.q<{ name: string; def: string }>(
      `SELECT tgname AS name, pg_get_triggerdef(oid) AS def FROM pg_trigger
        WHERE tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = $1::regnamespace) AND NOT tgisinternal`,
      [t.schema],
    );
    expect(defs.filter((d) => d.def.includes('stepd_is_executor(')).map((d) => d.name)).toEqual([]);
    const capacity = defs.find((d) => d.name === 'workflow_steps_guard_capacity')!.def;
    expect(capacity).toContain('BEFORE UPDATE OF priority, gated, concurrency_key, concurrency_limit, rate_keys ON');
    expect(capacity).toContain(`to_regrole('${t.schema}_executor'`);
  });
});
