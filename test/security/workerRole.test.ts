/**
 * The worker role and the worker contract (sql/0027) under attack: a role granted
 * `<schema>_worker` may call take_tasks, finish_task, finish_tasks, fail_task, extend_task and progress_task
 * and nothing else; a client role and a role with no grants may not call them; forged and stale
 * tokens, oversize results and a client readying a worker's step are refused and change nothing.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { connectAs } from '../workers/workerHelpers.js';
import {
  getSteps,
  insertWorkflow,
  securityEnv,
  waitFor,
  waitForWorkflow,
  type SecurityEnv,
  type TestSchema,
} from './helpers.js';

const CONFIG = { workers: { billing: {} } };
const WORKER_FUNCTIONS = ['take_tasks', 'finish_task', 'finish_tasks', 'fail_task', 'extend_task', 'progress_task'];
const CALLS: Record<string, string> = {
  take_tasks: `SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '10 seconds')`,
  finish_task: `SELECT stepd.finish_task(1, gen_random_uuid(), '{}')`,
  finish_tasks: `SELECT stepd.finish_tasks(ARRAY[1]::bigint[], ARRAY[gen_random_uuid()], ARRAY['{}']::jsonb[])`,
  fail_task: `SELECT stepd.fail_task(1, gen_random_uuid(), '{}')`,
  extend_task: `SELECT stepd.extend_task(1, gen_random_uuid(), interval '10 seconds')`,
  progress_task: `SELECT stepd.progress_task(1, gen_random_uuid(), '{"progress": 1}')`,
};

type Q = <R = any>(text: string, values?: unknown[]) => Promise<R[]>;

async function error(p: Promise<unknown>): Promise<{ code: string; message: string; detail?: string }> {
  const err = await p.then(() => undefined, (e: unknown) => e as { code: string; message: string; detail?: string });
  expect(err, 'expected a refusal').toBeDefined();
  return err!;
}

async function takeOne(w: { q: Q }): Promise<{ step_id: string; token: string; workflow_id: string }> {
  return waitFor(async () => (await w.q(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 1, interval '30 seconds')`))[0], 'a task');
}

async function env(): Promise<SecurityEnv & { worker: { role: string; q: Q } }> {
  const e = await securityEnv({ config: CONFIG });
  const worker = await connectAs(e.t, `${e.t.schema}_worker`, 'wrk');
  return { ...e, worker };
}

describe('the worker role', () => {
  it('cannot read, write or lock any stepd table, nor call any function but the six functions of the contract', async () => {
    const { t, worker } = await env();
    const tables = await t.q<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v')`,
      [t.schema],
    );
    expect(tables.length).toBeGreaterThan(5);
    for (const { name } of tables) {
      const table = `stepd.${pg.escapeIdentifier(name)}`;
      expect((await error(worker.q(`SELECT * FROM ${table} LIMIT 1`))).code, name).toBe('42501');
      expect((await error(worker.q(`DELETE FROM ${table}`))).code, name).toBe('42501');
      expect((await error(worker.q(`BEGIN; LOCK TABLE ${table} IN ACCESS SHARE MODE; COMMIT`))).code, name).toBe('42501');
    }
    expect((await error(worker.q(`INSERT INTO stepd.workflows (name, flow) VALUES ('x', '{}')`))).code).toBe('42501');
    expect((await error(worker.q(`UPDATE stepd.workflow_steps SET status = 'ready'`))).code).toBe('42501');
    // The client's definer functions and the contract's internal helpers.
    for (const call of [
      `SELECT stepd.delete_workflows(ARRAY[1]::bigint[])`,
      `SELECT * FROM stepd.remove_schedule('x')`,
      `SELECT * FROM stepd.remove_trigger('x')`,
      `SELECT stepd.stepd_expire_tasks(10)`,
      `SELECT stepd.stepd_task_held(1, gen_random_uuid(), true)`,
      `SELECT stepd.stepd_task_lease(interval '1 minute')`,
      `SELECT stepd.stepd_report_task(1, '{}', NULL, 'finished')`,
      `SELECT stepd.stepd_report_tasks(ARRAY[1]::bigint[], ARRAY['{}']::jsonb[])`,
    ]) {
      expect((await error(worker.q(call))).code, call).toBe('42501');
    }
    // Of every SECURITY DEFINER function in the schema, the worker role may execute the six only;
    // the other functions it may execute are PUBLIC's read-only helpers, which any role may call.
    const fns = await t.q<{ name: string; definer: boolean; mine: boolean; public: boolean }>(
      `SELECT p.proname AS name, p.prosecdef AS definer, has_function_privilege($2, p.oid, 'EXECUTE') AS mine,
              coalesce(aclexplode_public.ok, true) AS public
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         LEFT JOIN LATERAL (SELECT bool_or(a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS ok FROM aclexplode(p.proacl) a) aclexplode_public ON p.proacl IS NOT NULL
        WHERE n.nspname = $1 AND p.prorettype <> 'trigger'::regtype`,
      [t.schema, worker.role],
    );
    const definersMine = fns.filter((f) => f.definer && f.mine).map((f) => f.name).sort();
    expect(definersMine).toEqual([...WORKER_FUNCTIONS].sort());
    for (const f of fns.filter((x) => x.mine && !WORKER_FUNCTIONS.includes(x.name))) {
      expect(f.definer, f.name).toBe(false);
      expect(f.public, `${f.name}: executable by the worker role only because PUBLIC may`).toBe(true);
    }
  });

  it('a stepd_client role and a role with no grants cannot call the worker functions', async () => {
    const { t, client } = await env();
    const nobody = await connectAs(t, null, 'nog');
    for (const fn of WORKER_FUNCTIONS) {
      expect((await error(client.q(CALLS[fn]!))).code, `client: ${fn}`).toBe('42501');
      expect((await error(nobody.q(CALLS[fn]!))).code, `no grants: ${fn}`).toBe('42501');
    }
  });

  it('a client cannot ready, or write a result into, a step waiting for a worker', async () => {
    const { t, client, worker } = await env();
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } });
    const step = await waitFor(async () => (await getSteps(t, id)).find((s) => s.status === 'pending'), 'the step to wait for a worker');
    const err = await error(client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"id": "forged"}' WHERE id = $1 AND status = 'pending'`, [step.id]));
    expect(err.code).toBe('42501');
    expect(err.message).toMatch(/served by workers/);
    // Not readied: a worker still takes it, and its result is the one recorded.
    const task = await takeOne(worker);
    expect(task.step_id).toBe(step.id);
    await worker.q(`SELECT stepd.finish_task($1, $2, '{"id": "real"}')`, [task.step_id, task.token]);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect((await getSteps(t, id))[0]!.result).toEqual({ id: 'real' });
  });

  it('forged tokens, another task\'s token and a non-worker step are refused with 55000 and change nothing', async () => {
    const { t, worker, client } = await env();
    const a = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } });
    const b = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } });
    const gate = await insertWorkflow(t, { start: 'g', steps: { g: { approval: {}, done: true } } });
    const ta = await takeOne(worker);
    const tb = await takeOne(worker);
    const gateStep = await waitFor(async () => (await getSteps(t, gate)).find((s) => s.status === 'pending'), 'the gate');
    // A role that reads workflow_steps (a client) never sees a token: the table keeps its sha256.
    const rows = await client.q<{ row: string }>(`SELECT row_to_json(s)::text AS row FROM stepd.workflow_steps s WHERE s.workflow_id IN ($1, $2)`, [a, b]);
    expect(rows.length).toBe(2);
    for (const r of rows) for (const tok of [ta.token, tb.token]) expect(r.row).not.toContain(tok);
    const before = [...(await getSteps(t, a)), ...(await getSteps(t, b)), ...(await getSteps(t, gate))];
    for (const [stepId, token] of [
      [ta.step_id, randomBytes(16).toString('hex').replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5')],
      [ta.step_id, tb.token],
      [gateStep.id, ta.token],
      ['999999999', ta.token],
    ] as const) {
      for (const call of [
        `SELECT stepd.finish_task($1, $2, '{"forged": true}')`,
        `SELECT stepd.fail_task($1, $2, '{"code": "forged"}')`,
        `SELECT stepd.extend_task($1, $2, interval '1 hour')`,
        `SELECT stepd.progress_task($1, $2, '{"progress": 9}')`,
      ]) {
        const err = await error(worker.q(call, [stepId, token]));
        expect(err.code, call).toBe('55000');
        expect(err.detail).toBe('reason=unknown');
      }
    }
    expect([...(await getSteps(t, a)), ...(await getSteps(t, b)), ...(await getSteps(t, gate))]).toEqual(before);
    expect((await error(worker.q(`SELECT stepd.finish_task($1, NULL, '{}')`, [ta.step_id]))).code).toBe('22023');
  });

  it('an oversize result is refused (54000) and the task stays the worker\'s; patterns cannot inject LIKE wildcards', async () => {
    const { t, worker } = await env();
    await t.q(`UPDATE stepd.size_caps SET result_bytes = 1000`);
    const id = await insertWorkflow(t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true, output: '{{result}}' } } });
    const task = await takeOne(worker);
    const big = JSON.stringify({ blob: 'x'.repeat(5000) });
    const err = await error(worker.q(`SELECT stepd.finish_task($1, $2, $3)`, [task.step_id, task.token, big]));
    expect(err.code).toBe('54000');
    expect(err.message).toMatch(/caps\.resultBytes/);
    expect((await getSteps(t, id))[0]!.status).toBe('pending');
    const hugeError = JSON.stringify({ code: 'x', details: 'y'.repeat(70_000) });
    expect((await error(worker.q(`SELECT stepd.fail_task($1, $2, $3)`, [task.step_id, task.token, hugeError]))).code).toBe('54000');
    for (const p of [`ARRAY['%']`, `ARRAY['billing.%']`, `ARRAY['*']`, `ARRAY[]::text[]`, `ARRAY[NULL]::text[]`]) {
      expect((await error(worker.q(`SELECT * FROM stepd.take_tasks(${p}, 1, interval '10 seconds')`))).code, p).toBe('22023');
    }
    for (const [max, lease] of [['0', '10 seconds'], ['1001', '10 seconds'], ['1', '0 seconds'], ['1', '2 days']]) {
      expect((await error(worker.q(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], ${max}, interval '${lease}')`))).code).toBe('22023');
    }
    await worker.q(`SELECT stepd.finish_task($1, $2, '{"ok": true}')`, [task.step_id, task.token]);
    expect((await waitForWorkflow(t, id)).output).toEqual({ ok: true });
  });

  it('finish_tasks is all or nothing: one forged, stale or oversize entry refuses the call and changes nothing', async () => {
    const { t, worker } = await env();
    await t.q(`UPDATE stepd.size_caps SET result_bytes = 1000`);
    const flow = { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true, output: '{{result}}' } } };
    const ids = [await insertWorkflow(t, flow), await insertWorkflow(t, flow), await insertWorkflow(t, flow)];
    const tasks = [await takeOne(worker), await takeOne(worker), await takeOne(worker)];
    const [a, b, c] = tasks as [(typeof tasks)[0], (typeof tasks)[0], (typeof tasks)[0]];
    const snapshot = async () => (await Promise.all(ids.map((id) => getSteps(t, id)))).flat();
    const before = await snapshot();
    const call = (stepIds: string[], tokens: (string | null)[], results: (string | null)[]) =>
      worker.q(`SELECT stepd.finish_tasks($1::bigint[], $2::uuid[], $3::jsonb[]) AS n`, [stepIds, tokens, results]);
    const forged = '00000000-0000-4000-8000-000000000000';
    // A forged token, another task's token, an unknown step: 55000 naming the step, nothing changed.
    for (const [stepIds, tokens] of [
      [[a.step_id, b.step_id], [a.token, forged]],
      [[a.step_id, b.step_id], [a.token, c.token]],
      [[a.step_id, '999999999'], [a.token, b.token]],
    ] as const) {
      const err = await error(call([...stepIds], [...tokens], ['{"ok": 1}', '{"ok": 2}']));
      expect(err.code, err.message).toBe('55000');
      expect(err.detail).toBe('reason=unknown');
    }
    // An oversize result among good ones: 54000, nothing changed.
    expect((await error(call([a.step_id, b.step_id], [a.token, b.token], ['{"ok": 1}', JSON.stringify({ blob: 'x'.repeat(5000) })]))).code).toBe('54000');
    // Bad shapes: 22023.
    for (const [stepIds, tokens, results] of [
      [[a.step_id, a.step_id], [a.token, a.token], ['{}', '{}']],
      [[a.step_id, b.step_id], [a.token], ['{}', '{}']],
      [[a.step_id], [a.token], ['{}', '{}']],
      [[], [], []],
      [[a.step_id], [null], ['{}']],
      [Array.from({ length: 1001 }, (_, i) => String(i + 1)), Array.from({ length: 1001 }, () => forged), Array.from({ length: 1001 }, () => '{}')],
    ] as const) {
      expect((await error(call([...stepIds], [...tokens], [...results]))).code).toBe('22023');
    }
    expect((await error(worker.q(`SELECT stepd.finish_tasks(NULL, NULL, NULL)`))).code).toBe('22023');
    expect(await snapshot()).toEqual(before);
    // The real tokens record all three at once (a SQL NULL result is JSON null); then each is stale (ended).
    expect((await call([c.step_id, a.step_id, b.step_id], [c.token, a.token, b.token], ['{"n": 3}', '{"n": 1}', null]))[0]).toEqual({ n: 3 });
    const err = await error(call([a.step_id], [a.token], ['{"again": true}']));
    expect(err.code).toBe('55000');
    expect(err.detail).toBe('reason=ended');
    const outputs = await Promise.all(ids.map(async (id) => (await waitForWorkflow(t, id)).output));
    const byStep = new Map([[a.step_id, { n: 1 }], [b.step_id, null], [c.step_id, { n: 3 }]]);
    for (const [i, id] of ids.entries()) {
      const step = (await getSteps(t, id))[0]!;
      expect(step.result, `workflow ${id}`).toEqual(byStep.get(step.id));
      expect(outputs[i]).toEqual(byStep.get(step.id));
    }
  });

  it('a worker tool the workflow\'s user may not call fails with permission_denied before any worker sees it', async () => {
    const e = await securityEnv({ config: { ...CONFIG, permissions: { default: ['core.*'], users: { james: ['billing.*'] } } } });
    const worker = await connectAs(e.t, `${e.t.schema}_worker`, 'wrk');
    const denied = await insertWorkflow(e.t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } }, {}, { user: 'mallory' });
    const wf = await waitForWorkflow(e.t, denied);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'permission_denied' });
    expect(await worker.q(`SELECT * FROM stepd.take_tasks(ARRAY['billing.*'], 10, interval '10 seconds')`)).toEqual([]);
    const allowed = await insertWorkflow(e.t, { start: 'c', steps: { c: { tool: 'billing.charge', args: {}, done: true } } }, {}, { user: 'james' });
    const task = await takeOne(worker);
    expect(task.workflow_id).toBe(allowed);
  });
});
