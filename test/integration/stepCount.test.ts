/**
 * `workflows.step_count` is the number of the workflow's step rows, whatever its admission did:
 * the admission counts the first step row in advance (so a one-step workflow's row is written
 * once there), and takes the count back when the workflow got no row. Checked with a real
 * executor for each way an admission can end, and for a batch that mixes them.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

async function counts(t: TestSchema, id: string): Promise<{ counted: number; rows: number }> {
  const [r] = await t.q<{ counted: number; rows: number }>(
    `SELECT w.step_count AS counted, (SELECT count(*)::int FROM stepd.workflow_steps s WHERE s.workflow_id = w.id) AS rows
       FROM stepd.workflows w WHERE w.id = $1`,
    [id],
  );
  return r!;
}

const ONE_STEP = { start: 'a', steps: { a: { tool: 'core.noop', done: true } } };
const CHAIN = { start: 'a', steps: { a: { tool: 'core.noop', next: 'b' }, b: { tool: 'core.echo', args: { x: 1 }, done: true } } };
const PARALLEL_START = {
  start: 'fan',
  steps: {
    fan: { parallel: ['l', 'r'], join: 'end' },
    l: { tool: 'core.noop' },
    r: { tool: 'core.noop' },
    end: { tool: 'core.noop', done: true },
  },
};
const FOR_EACH_START = {
  start: 'each',
  steps: { each: { forEach: { items: '{{input.items}}', step: 'work' }, join: 'end' }, work: { tool: 'core.echo', args: { i: '{{item}}' } }, end: { tool: 'core.noop', done: true } },
};
const GATE_START = { start: 'ok', steps: { ok: { approval: { message: 'go?' }, next: 'a' }, a: { tool: 'core.noop', done: true } } };
const INVALID = { start: 'missing', steps: { a: { tool: 'core.noop', done: true } } };
const SCHEMA_REFUSES = { inputSchema: { type: 'object', required: ['must'] }, ...ONE_STEP };

describe('step_count after admission', () => {
  it('equals the step rows of workflows admitted in one batch: one step, a chain, forks at the start, a gate, and refused ones', async () => {
    const t = await createTestSchema();
    const ids = {
      oneStep: await insertWorkflow(t, ONE_STEP),
      chain: await insertWorkflow(t, CHAIN),
      parallel: await insertWorkflow(t, PARALLEL_START),
      forEach: await insertWorkflow(t, FOR_EACH_START, { items: [1, 2, 3] }),
      emptyForEach: await insertWorkflow(t, FOR_EACH_START, { items: [] }),
      invalid: await insertWorkflow(t, INVALID),
      inputRefused: await insertWorkflow(t, SCHEMA_REFUSES, {}),
      unknownByName: (await t.q<{ id: string }>(`INSERT INTO stepd.workflows (name) VALUES ('no-such-flow') RETURNING id`))[0]!.id,
    };
    const gate = await insertWorkflow(t, GATE_START);
    // Inserted before the executor starts: its first admission takes them all in one batch.
    await startExecutor(t);
    for (const id of Object.values(ids)) await waitForWorkflow(t, id);
    await waitForWorkflow(t, gate, ['running']);
    for (const [what, id] of Object.entries({ ...ids, gate })) {
      const c = await counts(t, id);
      expect({ what, ...c }).toEqual({ what, counted: c.rows, rows: c.rows });
    }
    expect((await counts(t, ids.oneStep)).rows).toBe(1);
    expect((await counts(t, ids.invalid)).counted).toBe(0);
    expect((await counts(t, ids.unknownByName)).counted).toBe(0);
    expect((await counts(t, ids.inputRefused)).counted).toBe(0);
    expect((await counts(t, gate)).counted).toBe(1);
  });

  it('stays equal to the rows when many one-step workflows are admitted in full batches', async () => {
    const t = await createTestSchema();
    await t.q(`INSERT INTO stepd.workflows (name, flow) SELECT 'many', $1::jsonb FROM generate_series(1, 1200)`, [JSON.stringify(ONE_STEP)]);
    await startExecutor(t);
    await waitFor(async () => (await t.q(`SELECT 1 FROM stepd.workflows WHERE status <> 'completed' LIMIT 1`)).length === 0, 'every workflow to complete');
    const [r] = await t.q<{ off: number; rows: number }>(
      `SELECT count(*) FILTER (WHERE w.step_count <> (SELECT count(*) FROM stepd.workflow_steps s WHERE s.workflow_id = w.id))::int AS off,
              (SELECT count(*)::int FROM stepd.workflow_steps) AS rows
         FROM stepd.workflows w`,
    );
    expect(r).toEqual({ off: 0, rows: 1200 });
  });
});
