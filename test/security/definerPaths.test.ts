/**
 * SECURITY DEFINER functions run as the tables' owner. PostgreSQL searches the caller's temporary
 * schema first for types and relations unless `pg_temp` is listed (last) in the function's
 * search_path, so a client that puts a domain `pg_temp.text` (or a view `pg_temp.workflows`) in
 * front of a definer function's names makes the owner run the client's code. Every definer
 * function of the schema pins `search_path = pg_catalog, pg_temp` (read from pg_proc, so future
 * functions are held to it too), and every path a client can drive through one (cancel, cancel a
 * parent with a live child, a child's end settling its parent, a signal readying a wait,
 * delete_workflows, remove_schedule, a signal starting a trigger's workflow, remove_trigger) runs none of the client's code as the owner — with the trap armed before the
 * guards first ran in the session, so a type PL/pgSQL resolved once cannot be the client's.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { ToolContext, ToolInfo, ToolProvider } from '../../src/tools/tool.js';
import {
  assertServing,
  createSecuredSchema,
  getSteps,
  getWorkflow,
  onCleanup,
  securityEnv,
  schemaRoles,
  waitFor,
  waitForStep,
  waitForWorkflow,
  type ClientRole,
  type SecurityEnv,
} from './helpers.js';

/** `block.wait` runs until the step is aborted (its workflow cancelled): a step that stays running. */
class BlockingTools implements ToolProvider {
  readonly prefix = 'block';
  async call(_tool: string, _args: unknown, ctx: ToolContext): Promise<unknown> {
    await new Promise<void>((resolve) => {
      if (ctx.signal.aborted) resolve();
      ctx.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    return null;
  }
  async list(): Promise<ToolInfo[]> {
    return [{ name: 'wait' }];
  }
}

type Run = Parameters<Parameters<ClientRole['session']>[0]>[0];

/**
 * The attacker's function: records the role it runs as, and when that is not the attacker
 * itself, grants the attacker `<schema>_executor`. Always true, so it never breaks the statement.
 */
async function armTrap(run: Run, executorRole: string): Promise<void> {
  await run(`CREATE FUNCTION pg_temp.f(v pg_catalog.text) RETURNS pg_catalog.bool
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
    BEGIN
      PERFORM pg_catalog.set_config('atk.ran_as', pg_catalog.concat(pg_catalog.current_setting('atk.ran_as', true), current_user, ' '), false);
      IF current_user <> session_user THEN
        BEGIN
          EXECUTE pg_catalog.format('GRANT %I TO %I', ${pg.escapeLiteral(executorRole)}, session_user);
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
      END IF;
      RETURN true;
    END $$`);
}

/** Domains over each type, checked by the attacker's function, in the session's pg_temp. */
async function shadowTypes(run: Run, types: string[]): Promise<void> {
  for (const type of types) {
    await run(`CREATE DOMAIN pg_temp.${type} AS pg_catalog.${type} CHECK (pg_temp.f(VALUE::pg_catalog.text))`);
  }
}

/**
 * Every table of the schema (pg_class, so future tables are covered) shadowed in pg_temp: a view
 * over the real rows that runs the attacker's function where the client may read the table, an
 * empty table of that name otherwise.
 */
async function shadowRelations(env: SecurityEnv, run: Run): Promise<string[]> {
  const tables = await env.t.q<{ name: string; readable: boolean }>(
    `SELECT c.relname AS name, has_table_privilege($2, c.oid, 'SELECT') AS readable
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`,
    [env.t.schema, env.client.role],
  );
  for (const { name, readable } of tables) {
    const real = `${pg.escapeIdentifier(env.t.schema)}.${pg.escapeIdentifier(name)}`;
    if (readable) await run(`CREATE TEMP VIEW ${pg.escapeIdentifier(name)} AS SELECT r.* FROM ${real} r WHERE pg_temp.f('shadow')`);
    else await run(`CREATE TEMP TABLE ${pg.escapeIdentifier(name)} (id pg_catalog.int8)`);
  }
  return tables.map((t) => t.name);
}

const childFlow = {
  start: 'approve',
  steps: { approve: { approval: true, next: 'work' }, work: { tool: 'probe.echo', args: { ok: 1 }, done: true, output: '{{result}}' } },
};
const parentFlow = (child: string) => ({ start: 'sub', steps: { sub: { workflow: { name: child, input: {} }, done: true, output: '{{result}}' } } });
const RUNNING_FLOW = { start: 'wait', steps: { wait: { tool: 'block.wait', done: true } } };

async function insertAs(run: Run, flow: unknown): Promise<string> {
  const [row] = await run<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('definer-path', $1, '{}') RETURNING id`, [JSON.stringify(flow)]);
  return row!.id;
}

async function childOf(env: SecurityEnv, parentId: string): Promise<string> {
  const child = await waitFor(async () => (await env.t.q(`SELECT id FROM stepd.workflows WHERE parent_id = $1`, [parentId]))[0], `the child of ${parentId}`);
  await waitForStep(env.t, child.id, 'approve', 'pending');
  return child.id;
}

/** Drives every definer path a client can reach, in the attacker's armed session, and checks each happened. */
async function runEveryDefinerPath(env: SecurityEnv, run: Run): Promise<void> {
  const child = `child_${env.client.role}`;
  await run(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2)`, [child, JSON.stringify(childFlow)]);

  // The honest contract first, so every guard has run (and PL/pgSQL resolved its types) in this session.
  const later = (await run<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, start_at) VALUES ('later', $1, now() + interval '1 day') RETURNING id`, [JSON.stringify(childFlow)]))[0]!.id;
  await run(`UPDATE stepd.workflows SET name = 'later, renamed', input = '{"x": 1}' WHERE id = $1`, [later]);
  await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [later]);
  const gated = await insertAs(run, childFlow);
  const gate = await waitForStep(env.t, gated, 'approve', 'pending');
  await run(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"approved": true}' WHERE id = $1`, [gate.id]);
  expect((await waitForWorkflow(env.t, gated)).status).toBe('completed');

  // fork_workflow (sql/0031): its own finished workflow, from its gate, with a new input; the fork waits at the gate again.
  const [forked] = await run<{ id: string }>(`SELECT stepd.fork_workflow($1, 'approve', '{"forked": true}', NULL)::text AS id`, [gated]);
  await waitForStep(env.t, forked!.id, 'approve', 'pending');
  expect(await getWorkflow(env.t, forked!.id)).toMatchObject({ forked_from: gated, created_role: env.client.role, input: { forked: true } });
  await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [forked!.id]);

  // stepd_cancel_steps: cancelling a workflow whose step is running.
  const running = await insertAs(run, RUNNING_FLOW);
  await waitForStep(env.t, running, 'wait', 'running');
  await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [running]);
  expect((await getSteps(env.t, running)).map((s) => s.status)).toEqual(['cancelled']);

  // stepd_cancel_child_workflow: cancelling a parent whose child lives.
  const parent = await insertAs(run, parentFlow(child));
  const liveChild = await childOf(env, parent);
  await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [parent]);
  expect((await getWorkflow(env.t, liveChild)).status).toBe('cancelled');
  expect((await getSteps(env.t, liveChild)).map((s) => s.status)).toEqual(['cancelled']);

  // stepd_settle_parent_step: a child's end (here: the client cancels the child) readies its parent's step.
  const settled = await insertAs(run, parentFlow(child));
  const settledChild = await childOf(env, settled);
  await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [settledChild]);
  const [sub] = await getSteps(env.t, settled);
  expect(sub!.result).toMatchObject({ workflowId: settledChild, status: 'cancelled' });
  await waitForWorkflow(env.t, settled);

  // stepd_signals_ready_waits: a signal the client sends readies a wait (its transition table
  // `added` shadowed in pg_temp too: the trigger must read its own).
  const signalName = `sig_${env.client.role}`;
  const waiting = await insertAs(run, { start: 'w', steps: { w: { signal: { name: signalName }, done: true, output: '{{result}}' } } });
  await waitForStep(env.t, waiting, 'w', 'pending');
  await run(`CREATE TEMP VIEW added AS SELECT s.* FROM stepd.signals s WHERE pg_temp.f('added')`);
  await run(`INSERT INTO stepd.signals (name, payload) VALUES ($1, '{"x": 1}')`, [signalName]);
  expect((await waitForWorkflow(env.t, waiting)).output).toMatchObject({ name: signalName, payload: { x: 1 } });

  // delete_workflows: its finished workflows, their steps and children (the guards fire on each row).
  const deleted = await run<{ id: string }>(`SELECT id FROM stepd.delete_workflows($1::bigint[]) AS id ORDER BY id`, [[later, gated, forked!.id, running, parent, settled, waiting]]);
  expect(deleted.map((r) => r.id)).toEqual([later, gated, forked!.id, running, parent, settled, waiting]);
  expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE id = ANY($1::bigint[])`, [[running, parent, settled, liveChild, settledChild]])).toEqual([]);

  // remove_schedule: its own schedule.
  await run(`INSERT INTO stepd.schedules (name, cron, flow) VALUES ($1, '0 9 * * *', $2)`, [`s_${env.client.role}`, child]);
  expect(await run(`SELECT name FROM stepd.remove_schedule($1)`, [`s_${env.client.role}`])).toEqual([{ name: `s_${env.client.role}` }]);

  // stepd_start_triggered_workflows: a signal starts a trigger's workflow (template resolved as the owner); remove_trigger.
  await run(`INSERT INTO stepd.triggers (name, signal, flow, input) VALUES ($1, 'definer.path', $2, '{"k": "{{signal.key}} {{signal.payload.n}}"}')`, [`g_${env.client.role}`, child]);
  const [signal] = await run<{ id: string }>(`INSERT INTO stepd.signals (name, key, payload) VALUES ('definer.path', 'k', '{"n": 1}') RETURNING id::text`);
  const [started] = await env.t.q(`SELECT id, input, created_role FROM stepd.workflows WHERE key = $1`, [`signal:g_${env.client.role}:${signal!.id}`]);
  expect(started).toMatchObject({ input: { k: 'k 1' }, created_role: env.client.role });
  await run(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [started.id]);
  expect(await run(`SELECT name FROM stepd.remove_trigger($1)`, [`g_${env.client.role}`])).toEqual([{ name: `g_${env.client.role}` }]);
}

/** The attacker's function ran only as the attacker (proving the trap was armed), and the attacker gained nothing. */
async function assertNothingRanAsOwner(env: SecurityEnv, run: Run): Promise<void> {
  const ran = (await run<{ ran: string | null }>(`SELECT pg_catalog.current_setting('atk.ran_as', true) AS ran`))[0]?.ran;
  const roles = new Set((ran ?? '').split(' ').filter(Boolean));
  expect([...roles], 'the trap never fired: the test proves nothing').toContain(env.client.role);
  expect([...roles], "the attacker's function ran as another role").toEqual([env.client.role]);
  const [member] = await env.t.q(`SELECT pg_has_role($1, $2, 'MEMBER') AS executor`, [env.client.role, schemaRoles(env.t.schema).executor]);
  expect(member).toEqual({ executor: false });
  await env.bystander.assertUndisturbedAndServed();
  await assertServing(env.t);
}

/** Whether a function's proconfig sets search_path with pg_catalog first and pg_temp last. */
function pinned(config: string[] | null): boolean {
  const setting = (config ?? []).find((c) => c.startsWith('search_path='));
  const path = setting ? setting.slice('search_path='.length).split(',').map((s) => s.trim().replace(/^"|"$/g, '')) : [];
  return path[0] === 'pg_catalog' && path[path.length - 1] === 'pg_temp';
}

describe('SECURITY DEFINER functions', () => {
  it('every definer function of the schema (and of pg-boss beside it) pins search_path = pg_catalog, …, pg_temp; the trigger ones cannot be called by anyone else', async () => {
    const t = await createSecuredSchema();
    const nobody = `nogrant_${t.schema}`;
    await t.db.query(`CREATE ROLE ${pg.escapeIdentifier(nobody)} NOLOGIN`);
    onCleanup(() => t.db.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(nobody)}`).then(() => undefined));
    const fns = await t.q<{ fn: string; config: string[] | null; trigger: boolean; public_execute: boolean }>(
      `SELECT p.oid::regprocedure::text AS fn, p.proconfig AS config, p.prorettype = 'trigger'::regtype AS trigger,
              has_function_privilege($2, p.oid, 'EXECUTE') AS public_execute
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.prosecdef AND n.nspname = ANY($1::text[]) ORDER BY 1`,
      [[t.schema, `${t.schema}_boss`], nobody],
    );
    const names = fns.map((f) => f.fn.replace(`${t.schema}.`, ''));
    expect(names).toEqual(
      expect.arrayContaining(['stepd_cancel_steps()', 'stepd_settle_parent_step()', 'stepd_cancel_child_workflow()', 'stepd_signals_ready_waits()', 'stepd_signals_wake_executors()', 'delete_workflows(bigint[])', 'remove_schedule(text)', 'stepd_start_triggered_workflows()', 'remove_trigger(text)', 'fork_workflow(bigint,text,jsonb,jsonb)']),
    );
    const unpinned = fns.filter((f) => !pinned(f.config));
    expect(unpinned.map((f) => `${f.fn} ${JSON.stringify(f.config)}`), 'definer functions without search_path = pg_catalog, …, pg_temp').toEqual([]);
    // A role with no grants may call none of them (PUBLIC has no EXECUTE); the contract's two are granted to the client role.
    expect(fns.filter((f) => f.public_execute).map((f) => f.fn)).toEqual([]);
    const client = schemaRoles(t.schema).client;
    const callable = await t.q(
      `SELECT has_function_privilege($1, $2, 'EXECUTE') AS del, has_function_privilege($1, $3, 'EXECUTE') AS rm, has_function_privilege($1, $4, 'EXECUTE') AS rmt`,
      [client, `${t.schema}.delete_workflows(bigint[])`, `${t.schema}.remove_schedule(text)`, `${t.schema}.remove_trigger(text)`],
    );
    expect(callable).toEqual([{ del: true, rm: true, rmt: true }]);
    const triggers = await t.q(`SELECT bool_or(has_function_privilege($2, p.oid, 'EXECUTE')) AS any FROM pg_proc p
       WHERE p.prosecdef AND p.pronamespace = $1::regnamespace AND p.prorettype = 'trigger'::regtype`, [t.schema, client]);
    expect(triggers).toEqual([{ any: false }]);

    // Triggers on the tables the definer functions write fire as the owner under those writes; a
    // PL/pgSQL one that declares variables resolves their types once per session, possibly under
    // the client's search_path (pg_temp first): each such function pins its own path.
    const nested = await t.q<{ fn: string; config: string[] | null }>(
      `SELECT DISTINCT p.oid::regprocedure::text AS fn, p.proconfig AS config
         FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid JOIN pg_language l ON l.oid = p.prolang
        WHERE g.tgrelid = ANY(ARRAY[$1::regclass, $2::regclass]) AND NOT g.tgisinternal
          AND l.lanname = 'plpgsql' AND p.prosrc ~* '^\\s*declare'`,
      [`${t.schema}.workflows`, `${t.schema}.workflow_steps`],
    );
    expect(nested.length).toBeGreaterThan(0);
    expect(nested.filter((f) => !pinned(f.config)).map((f) => f.fn), 'trigger functions with variables, fired under definer writes, without a pinned search_path').toEqual([]);
  });

  it('the sample: a pg_temp.text domain whose check calls the client\'s function never runs as the owner on any definer path', async () => {
    const env = await securityEnv({ providers: [new BlockingTools()] });
    await env.client.session(async (run) => {
      await armTrap(run, schemaRoles(env.t.schema).executor);
      await shadowTypes(run, ['text']);
      await run(`SELECT 'armed'::text`);
      await runEveryDefinerPath(env, run);
      await assertNothingRanAsOwner(env, run);
    });
  });

  it('variants: domains over jsonb, json, int8, int4, bool, timestamptz, oid, name, numeric and views shadowing every table run nothing as the owner', async () => {
    const env = await securityEnv({ providers: [new BlockingTools()] });
    await env.client.session(async (run) => {
      await armTrap(run, schemaRoles(env.t.schema).executor);
      await shadowTypes(run, ['jsonb', 'json', 'int8', 'int4', 'bool', 'timestamptz', 'oid', 'name', 'numeric']);
      const shadowed = await shadowRelations(env, run);
      expect(shadowed).toEqual(expect.arrayContaining(['workflows', 'workflow_steps', 'schedules', 'flows']));
      await run(`SELECT '{}'::jsonb, count(*) FROM workflows`);
      await runEveryDefinerPath(env, run);
      await assertNothingRanAsOwner(env, run);
    });
  });
});
