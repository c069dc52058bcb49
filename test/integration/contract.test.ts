/**
 * The SQL contract as another service sees it (migrations: migrations.test.ts): the guard
 * trigger's allowed and refused writes, the wake-up NOTIFY, named constraints, and a daemon
 * that keeps serving while malformed flows stream in.
 */
import { describe, expect, it } from 'vitest';
import {
  asExecutor,
  createTestSchema,
  getSteps,
  getWorkflow,
  insertWorkflow,
  startExecutor,
  waitFor,
  waitForWorkflow,
  type TestSchema,
} from '../helpers/db.js';
import { listenFor } from '../helpers/listen.js';

const GATE_FLOW = { start: 'g', steps: { g: { approval: true, next: 'e' }, e: { tool: 'core.echo', args: { ok: 1 }, done: true } } };

type Fixture = Record<'wf' | 'pending' | 'running' | 'done', string>;

/** An admitted (running) workflow with a pending gate, a running step and a done step. */
async function runningWorkflow(t: TestSchema): Promise<Fixture> {
  const wf = await insertWorkflow(t, GATE_FLOW);
  await asExecutor(t, `UPDATE stepd.workflows SET status = 'running', started_at = now() WHERE id = $1`, [wf]);
  const rows = await asExecutor<{ id: string; status: string }>(
    t,
    `INSERT INTO stepd.workflow_steps (workflow_id, name, tool, args, status, started_at, lease_until, executor_id, completed_at, result)
     VALUES ($1, 'g', NULL, NULL, 'pending', NULL, NULL, NULL, NULL, NULL),
            ($1, 'e', 'core.echo', '{"ok":1}', 'running', now(), now() + interval '1 hour', 'someone', NULL, NULL),
            ($1, 'e', 'core.echo', '{"ok":1}', 'done', now(), NULL, NULL, now(), '{"ok":1}')
     RETURNING id, status`,
    [wf],
  );
  const id = (status: string) => rows.find((r) => r.status === status)!.id;
  return { wf, pending: id('pending'), running: id('running'), done: id('done') };
}

/** The write fails with check_violation and a message naming the rule. */
async function refused(promise: Promise<unknown>, message: RegExp): Promise<void> {
  await expect(promise).rejects.toMatchObject({ code: '23514', message: expect.stringMatching(message) });
}

describe('the guard refuses every external write outside the contract, naming the rule', () => {
  it('refuses a workflow inserted with a status other than new, or with executor columns set', async () => {
    const t = await createTestSchema();
    await refused(t.q(`INSERT INTO stepd.workflows (name, flow, status) VALUES ('x', '{}', 'running')`), /must be inserted with status 'new'/);
    await refused(t.q(`INSERT INTO stepd.workflows (name, flow, output) VALUES ('x', '{}', '{}')`), /may set only name, flow, flow_version, input, created_by, key and start_at/);
  });

  it('refuses inserting a step', async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await refused(t.q(`INSERT INTO stepd.workflow_steps (workflow_id, name) VALUES ($1, 'g')`, [wf]), /steps are created by the executor/);
  });

  it('refuses setting a pending step to anything but ready', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await refused(
      t.q(`UPDATE stepd.workflow_steps SET status = 'done', completed_at = now() WHERE id = $1`, [f.pending]),
      /can only be set to 'ready' from outside the executor \(got done\)/,
    );
  });

  it('refuses readying a step that is running or done', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await refused(t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [f.running]), /is running; only a pending step can be readied/);
    await refused(t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [f.done]), /is done; only a pending step can be readied/);
  });

  it("refuses changing a step's args while readying it", async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await refused(
      t.q(`UPDATE stepd.workflow_steps SET status = 'ready', args = '{"evil":true}' WHERE id = $1`, [f.pending]),
      /may set only status, result and readied_by/,
    );
  });

  it('refuses changing the flow of an admitted workflow, even from an executor-marked session', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await refused(t.q(`UPDATE stepd.workflows SET flow = '{"start":"x","steps":{}}' WHERE id = $1`, [f.wf]), /flow of workflow \d+ is frozen/);
    const client = await t.db.connect();
    try {
      await client.query(`SET stepd.executor = 'on'`);
      await refused(client.query(`UPDATE ${t.schema}.workflows SET flow = '{}' WHERE id = $1`, [f.wf]), /is frozen: it was admitted and is running/);
    } finally {
      await client.query(`RESET stepd.executor`);
      client.release();
    }
  });

  it('refuses cancelling a completed workflow', async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await asExecutor(t, `UPDATE stepd.workflows SET status = 'completed', started_at = now(), completed_at = now() WHERE id = $1`, [wf]);
    await refused(t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [wf]), /already completed; only new or running workflows can be cancelled/);
  });

  it('refuses setting a workflow to a status other than cancelled, or running when it has not failed', async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await refused(t.q(`UPDATE stepd.workflows SET status = 'completed' WHERE id = $1`, [wf]), /can only be set to 'cancelled'/);
    await refused(t.q(`UPDATE stepd.workflows SET status = 'running' WHERE id = $1`, [wf]), /is new; only a failed workflow can be redriven/);
  });

  it('refuses a new workflow that sets the executor-only sub-workflow or redrive columns', async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await refused(t.q(`INSERT INTO stepd.workflows (name, flow, parent_id, parent_step_id) VALUES ('x', '{}', $1, 1)`, [wf]), /may set only/);
    await refused(t.q(`INSERT INTO stepd.workflows (name, flow, depth) VALUES ('x', '{}', 3)`), /may set only/);
    await refused(t.q(`UPDATE stepd.workflows SET redrive_requested_at = now() WHERE id = $1`, [wf]), /may not be changed that way/);
  });

  it('refuses setting cancelled_at without cancelling, on a new or running workflow', async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await refused(t.q(`UPDATE stepd.workflows SET cancelled_at = now() WHERE id = $1`, [wf]), /cancelled_at is set by stepd/);
    const f = await runningWorkflow(t);
    await refused(t.q(`UPDATE stepd.workflows SET cancelled_at = now() WHERE id = $1`, [f.wf]), /cancelled_at is set by stepd/);
  });

  it('refuses deleting a running workflow', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await refused(t.q(`DELETE FROM stepd.workflows WHERE id = $1`, [f.wf]), /is running; only completed, failed or cancelled workflows can be deleted/);
  });

  it('refuses deleting a single step, even of a finished workflow', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await refused(t.q(`DELETE FROM stepd.workflow_steps WHERE id = $1`, [f.done]), /steps cannot be deleted one by one/);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [f.wf]);
    await refused(t.q(`DELETE FROM stepd.workflow_steps WHERE workflow_id = $1`, [f.wf]), /steps cannot be deleted one by one/);
  });

  it('refuses truncating either table', async () => {
    const t = await createTestSchema();
    await runningWorkflow(t);
    await refused(t.q(`TRUNCATE stepd.workflow_steps`), /workflow_steps cannot be truncated from outside the executor/);
    await refused(t.q(`TRUNCATE stepd.workflows CASCADE`), /workflows cannot be truncated from outside the executor/);
    expect(await t.q(`SELECT id FROM stepd.workflow_steps`)).toHaveLength(3);
  });

  it("refuses a step write made from another service's trigger", async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await t.q(`CREATE TABLE stepd.approvals (step_id bigint)`);
    await t.q(`CREATE FUNCTION stepd.approve() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN UPDATE ${t.schema}.workflow_steps SET status = 'done', completed_at = now() WHERE id = NEW.step_id; RETURN NEW; END $$`);
    await t.q(`CREATE TRIGGER approve AFTER INSERT ON stepd.approvals FOR EACH ROW EXECUTE FUNCTION stepd.approve()`);
    await refused(t.q(`INSERT INTO stepd.approvals VALUES ($1)`, [f.pending]), /can only be set to 'ready'/);
    expect((await getSteps(t, f.wf)).find((s) => s.id === f.pending)!.status).toBe('pending');
  });

  it('ignores a created_at given by the inserting service, so admission cannot trip on it', async () => {
    const t = await createTestSchema();
    const [row] = await t.q(`INSERT INTO stepd.workflows (name, flow, created_at) VALUES ('x', '{}', now() + interval '1 day') RETURNING created_at, (created_at <= now()) AS sane`);
    expect(row.sane).toBe(true);
  });
});

describe('the writes the contract allows', () => {
  it("edits a new workflow's flow", async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await t.q(`UPDATE stepd.workflows SET flow = '{"start":"a","steps":{"a":{"tool":"core.noop"}}}' WHERE id = $1`, [wf]);
    expect((await getWorkflow(t, wf)).flow).toEqual({ start: 'a', steps: { a: { tool: 'core.noop' } } });
  });

  it('cancels a new workflow, setting cancelled_at', async () => {
    const t = await createTestSchema();
    const wf = await insertWorkflow(t, GATE_FLOW);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [wf]);
    expect(await getWorkflow(t, wf)).toMatchObject({ status: 'cancelled', cancelled_at: expect.any(Date) });
  });

  it('cancels a running workflow and its live steps in the same transaction', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    const client = await t.db.connect();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE ${t.schema}.workflows SET status = 'cancelled' WHERE id = $1`, [f.wf]);
      const inTx = await client.query(`SELECT id, status FROM ${t.schema}.workflow_steps WHERE workflow_id = $1 ORDER BY id`, [f.wf]);
      expect(inTx.rows.map((r) => r.status)).toEqual(['cancelled', 'cancelled', 'done']);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await getWorkflow(t, f.wf)).cancelled_at).toBeInstanceOf(Date);
    const steps = await getSteps(t, f.wf);
    expect(steps.map((s) => [s.status, s.completed_at !== null, s.lease_until])).toEqual([
      ['cancelled', true, null],
      ['cancelled', true, null],
      ['done', true, null],
    ]);
  });

  it('deletes a finished workflow together with its steps, fan-out branches included', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    await asExecutor(t, `INSERT INTO stepd.workflow_steps (workflow_id, name, status, fanout_id, item_index) VALUES ($1, 'g', 'pending', $2, 0)`, [f.wf, f.done]);
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [f.wf]);
    await t.q(`DELETE FROM stepd.workflows WHERE id = $1`, [f.wf]);
    expect(await t.q(`SELECT id FROM stepd.workflow_steps WHERE workflow_id = $1`, [f.wf])).toEqual([]);
  });

  it('readies a pending step with a result and readied_by', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    const [row] = await t.q(
      `UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": false, "reason": "too costly"}', readied_by = 'james'
        WHERE id = $1 AND status = 'pending' RETURNING status, result, readied_by, readied_at, ready_at`,
      [f.pending],
    );
    const readied = { status: 'ready', result: { approved: false, reason: 'too costly' }, readied_by: 'james' };
    expect(row).toMatchObject({ ...readied, readied_at: expect.any(Date), ready_at: expect.any(Date) });
  });

  it('deduplicates inserts by key with ON CONFLICT (key) DO NOTHING', async () => {
    const t = await createTestSchema();
    const insert = () => t.q(`INSERT INTO stepd.workflows (name, flow, key) VALUES ('x', '{}', 'k1') ON CONFLICT (key) DO NOTHING RETURNING id`);
    expect([(await insert()).length, (await insert()).length]).toEqual([1, 0]);
  });
});

describe('wake-ups on stepd_wakeup', () => {
  it('arrive for an inserted workflow and a readied step, with {schema, table, id, status}', async () => {
    const t = await createTestSchema();
    const f = await runningWorkflow(t);
    const got = await listenFor<{ schema: string; id: number }>(t, 'stepd_wakeup');

    const wf = await insertWorkflow(t, GATE_FLOW);
    await t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [f.pending]);
    await waitFor(() => got.length >= 2, 'two wake-ups');
    expect(got).toEqual([
      { schema: t.schema, table: 'workflows', id: Number(wf), status: 'new' },
      { schema: t.schema, table: 'workflow_steps', id: Number(f.pending), status: 'ready' },
    ]);
  });

  it('come once per INSERT statement, naming its first new workflow, however many rows it inserts', async () => {
    const t = await createTestSchema();
    const got = await listenFor<{ schema: string; id: number }>(t, 'stepd_wakeup');
    const rows = await t.q<{ id: string }>(
      `INSERT INTO stepd.workflows (name, flow) SELECT 'burst', $1::jsonb FROM generate_series(1, 50) RETURNING id`,
      [JSON.stringify(GATE_FLOW)],
    );
    const marker = await insertWorkflow(t, GATE_FLOW);
    await waitFor(() => got.length >= 2, 'the wake-ups of both statements');
    const first = Math.min(...rows.map((r) => Number(r.id)));
    expect(got).toEqual([
      { schema: t.schema, table: 'workflows', id: first, status: 'new' },
      { schema: t.schema, table: 'workflows', id: Number(marker), status: 'new' },
    ]);
  });

  it("stay quiet for the executor's own writes", async () => {
    const t = await createTestSchema();
    const got = await listenFor<{ schema: string; id: number }>(t, 'stepd_wakeup');
    await asExecutor(t, `INSERT INTO stepd.workflows (name, flow) VALUES ('own', '{}')`);
    const marker = await insertWorkflow(t, GATE_FLOW);
    // Notifications arrive in commit order: once the later external one is here, the earlier would be too.
    await waitFor(() => got.length >= 1, 'the external wake-up');
    expect(got.map((p) => p.id)).toEqual([Number(marker)]);
  });
});

describe('schema invariants', () => {
  it('names every CHECK constraint, for statuses and timestamp order', async () => {
    const t = await createTestSchema();
    const rows = await t.q<{ table: string; name: string }>(
      `SELECT conrelid::regclass::text AS table, conname AS name FROM pg_constraint
        WHERE connamespace = $1::regnamespace AND contype = 'c' ORDER BY 1, 2`,
      [t.schema],
    );
    const names = rows.map((r) => r.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'workflows_status_valid', 'workflows_started_after_created', 'workflows_completed_after_started',
        'workflow_steps_status_valid', 'workflow_steps_started_after_created', 'workflow_steps_completed_after_started',
      ]),
    );
    for (const n of names) expect(n).not.toMatch(/_check\d*$/);
  });

  it('reports the violated constraint by name', async () => {
    const t = await createTestSchema();
    const err = await t.q(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('x', '{}', '[1]')`).catch((e: { constraint?: string }) => e);
    expect(err).toMatchObject({ constraint: 'workflows_input_is_object' });
    const f = await runningWorkflow(t);
    const bad = await asExecutor(t, `UPDATE stepd.workflow_steps SET status = 'bogus' WHERE id = $1`, [f.pending]).catch((e: { constraint?: string }) => e);
    expect(bad).toMatchObject({ constraint: 'workflow_steps_status_valid' });
  });
});

describe('a daemon fed malformed flows keeps serving', () => {
  it('fails each malformed flow at once with invalid_flow and its issues, while valid ones complete', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    const valid = { start: { name: 'a', tool: 'core.echo', args: { n: '{{input.n}}' }, done: true } };
    const malformed: unknown[] = [
      [1, 2, 3], 'just text', 42, null,
      { start: 'a', steps: { a: { tool: 'core.noop', next: 'ghost' } } },
      { start: 'a', steps: { a: { tool: 7 } } },
      { start: 'a', steps: { a: { tool: 'core.noop', retry: { maxAttempts: 'x' } } } },
      { start: { tool: 'core.noop' }, b: { tool: 'core.noop' } },
      { start: 'a', steps: { a: { tool: 'core.noop', branch: [{ if: '(((', then: 'a' }] } } },
      { steps: {} },
    ];
    const ids: { id: string; ok: boolean }[] = [];
    for (let i = 0; i < 50; i++) {
      const ok = i % 5 === 0;
      const flow = ok ? valid : malformed[i % malformed.length];
      const [row] = await t.q(`INSERT INTO stepd.workflows (name, flow, input) VALUES ($1, $2::jsonb, $3) RETURNING id`, [
        `w${i}`,
        JSON.stringify(flow),
        JSON.stringify({ n: i }),
      ]);
      ids.push({ id: row.id, ok });
    }
    for (const { id, ok } of ids) {
      const wf = await waitForWorkflow(t, id);
      if (ok) {
        expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
        continue;
      }
      expect(wf.status).toBe('failed');
      const error = wf.error as unknown as { code: string; issues: { path: string; message: string }[] };
      expect(error.code).toBe('invalid_flow');
      expect(error.issues.length).toBeGreaterThan(0);
      for (const issue of error.issues) expect(issue).toStrictEqual({ path: expect.any(String), message: expect.stringMatching(/\w/) });
      expect(await getSteps(t, id)).toEqual([]);
    }
    // Illegal writes against the live daemon's rows are refused too.
    const [doneStep] = await t.q(`SELECT id FROM stepd.workflow_steps WHERE status = 'done' LIMIT 1`);
    await refused(t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [doneStep.id]), /only a pending step can be readied/);
    await refused(t.q(`INSERT INTO stepd.workflow_steps (workflow_id, name) VALUES ($1, 'x')`, [ids[0]!.id]), /steps are created by the executor/);
    await refused(t.q(`UPDATE stepd.workflows SET flow = '{}' WHERE id = $1`, [ids[0]!.id]), /is frozen/);
    // Still serving after the stream.
    const after = await insertWorkflow(t, valid, { n: 'last' });
    expect((await waitForWorkflow(t, after)).output).toEqual({ n: 'last' });
  });

  it('keeps admitting after a workflow whose insert named a future created_at', async () => {
    const t = await createTestSchema();
    await startExecutor(t);
    await t.q(`INSERT INTO stepd.workflows (name, flow, created_at) VALUES ('future', '{"start":"a","steps":{"a":{"tool":"core.noop"}}}', now() + interval '1 day')`);
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.noop' } } });
    expect((await waitForWorkflow(t, id)).status).toBe('completed');
  });
});
