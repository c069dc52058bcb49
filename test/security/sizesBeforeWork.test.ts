/**
 * Sizes and costs are checked before work (issue 20, bullet 6, first half). As a real LOGIN role
 * granted `<schema>_client`, against a real executor:
 * - a 60 MB input is refused by the database at INSERT (SQLSTATE 54000, naming caps.inputBytes),
 *   thirty times, without the executor's memory growing; variants: a compressed copy from the
 *   client's own table, a 60 MB result readying a pending gate, an over-cap registered flow, a
 *   flow with more steps than caps.flowSteps (inline, as JSON text, in the seed's flat form, in the
 *   registry);
 * - eight 10,000-step flows and CEL bombs (membership, list equality, string building, nested
 *   comprehensions) are refused or fail their own step with budget_exceeded, while another role's
 *   one-step workflow completes within a second;
 * - the caps the database applies are the executor's config, written by the executor: clients
 *   read them and cannot change or lock them.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_CAPS } from '../../src/flow/caps.js';
import { clientInsert, createClientRole, getSteps, securityEnv, waitForStep, waitForWorkflow, type ClientRole, type SecurityEnv } from './helpers.js';

const SIXTY_MB = 60 * 1024 * 1024;
const ONE_STEP = { start: 'a', steps: { a: { tool: 'core.echo', args: { beside: true }, done: true, output: '{{result}}' } } };
const GATE = { start: 'g', steps: { g: { approval: true, done: true, output: '{{result}}' } } };

/** The statement fails with SQLSTATE 54000 (program_limit_exceeded) and a message matching `what`. */
async function refusedBySize(promise: Promise<unknown>, what: RegExp): Promise<string> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e as { code?: string; message: string },
  );
  expect(err, `expected the write to be refused (${what})`).toBeDefined();
  expect(err!.code, err!.message).toBe('54000');
  expect(err!.message).toMatch(what);
  return err!.message;
}

/** Another role's one-step workflow, inserted now: completes within a second (database clock). */
async function otherRoleServedWithinASecond(env: SecurityEnv, other: ClientRole): Promise<void> {
  const id = await clientInsert(other, ONE_STEP, { name: 'other-role' });
  const wf = await waitForWorkflow(env.t, id);
  expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
  const [row] = await env.t.q<{ ms: number }>(`SELECT extract(epoch FROM completed_at - created_at) * 1000 AS ms FROM stepd.workflows WHERE id = $1`, [id]);
  expect(Number(row!.ms)).toBeLessThan(1_000);
}

/** A flow of `n` chained steps. */
function chain(n: number): { start: string; steps: Record<string, unknown> } {
  const steps: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) steps[`s${i}`] = i + 1 < n ? { tool: 'core.noop', next: `s${i + 1}` } : { tool: 'core.noop', done: true };
  return { start: 's0', steps };
}

/** The executor's memory after a full collection when the test runs with --expose-gc. */
function rss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().rss;
}

describe('inputs, results and flows over their caps are refused by the database', () => {
  it('thirty 60 MB inputs are refused at INSERT naming caps.inputBytes; the executor never loads them', async () => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const before = rss();
    // Built by the client's own backend: the bytes never pass through this process.
    const attacks = Array.from({ length: 30 }, () =>
      refusedBySize(
        env.client.q(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('big', $1, jsonb_build_object('blob', repeat('x', $2)))`, [JSON.stringify(ONE_STEP), SIXTY_MB]),
        /input is \d+ bytes as JSON, above caps\.inputBytes \(1048576 bytes\)/,
      ),
    );
    await otherRoleServedWithinASecond(env, other);
    await Promise.all(attacks);
    expect(rss() - before).toBeLessThan(100 * 1024 * 1024);
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE name = 'big'`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it("an over-cap input copied compressed from the client's own table, and one sent as a parameter, are refused too", async () => {
    const env = await securityEnv({ config: { caps: { inputBytes: 100_000 } } });
    await env.client.session(async (run) => {
      // Stored compressed (about 70 kB for 6 MB of one letter): its stored size is within the cap.
      await run(`CREATE TEMP TABLE blobs AS SELECT jsonb_build_object('blob', repeat('x', 6000000)) AS v`);
      const [{ stored }] = await run(`SELECT pg_column_size(v) AS stored FROM blobs`);
      expect(stored).toBeLessThan(100_000);
      await refusedBySize(
        run(`INSERT INTO stepd.workflows (name, flow, input) SELECT 'copied', $1, v FROM blobs`, [JSON.stringify(ONE_STEP)]),
        /input is 600\d{4} bytes as JSON, above caps\.inputBytes \(100000 bytes\)/,
      );
    });
    // Just over the cap, as compact JSON: refused exactly, not by the coarse stored-size bound.
    await refusedBySize(clientInsert(env.client, ONE_STEP, { input: { blob: 'x'.repeat(100_000) } }), /input is 1000\d\d bytes as JSON, above caps\.inputBytes/);
    // Numbers take 6x their JSON size as jsonb: 90,000 bytes of small numbers is within the cap.
    const numbers = await clientInsert(env.client, ONE_STEP, { input: { n: Array.from({ length: 44_000 }, () => 0) } });
    expect((await waitForWorkflow(env.t, numbers)).status).toBe('completed');
    expect(await env.t.q(`SELECT id FROM stepd.workflows WHERE name = 'copied'`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a 60 MB result readying a pending gate is refused naming caps.resultBytes; the gate stays pending', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, GATE);
    const gate = await waitForStep(env.t, id, 'g', 'pending');
    const before = rss();
    await refusedBySize(
      env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = jsonb_build_object('blob', repeat('x', $2)) WHERE id = $1`, [gate.id, SIXTY_MB]),
      /result of step \d+ is \d+ bytes as JSON, above caps\.resultBytes \(4194304 bytes\)/,
    );
    expect(rss() - before).toBeLessThan(100 * 1024 * 1024);
    expect((await getSteps(env.t, id))[0]).toMatchObject({ status: 'pending', result: null });
    // The honest readying still works.
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = $2 WHERE id = $1`, [gate.id, JSON.stringify({ ok: true })]);
    expect(await waitForWorkflow(env.t, id)).toMatchObject({ status: 'completed', output: { ok: true } });
    await env.bystander.assertUndisturbedAndServed();
  });

  it('an over-cap registered flow version is refused naming the flow size limit', async () => {
    const env = await securityEnv();
    await refusedBySize(
      env.client.q(
        `INSERT INTO stepd.flows (name, flow) VALUES ('huge', jsonb_build_object('start', 'a', 'steps', jsonb_build_object('a', jsonb_build_object('tool', 'core.echo', 'args', jsonb_build_object('blob', repeat('x', 3000000))))))`,
      ),
      /flow 'huge' is \d+ bytes as JSON, above the flow size limit \(1048576 bytes\)/,
    );
    expect(await env.t.q(`SELECT version FROM stepd.flows WHERE name = 'huge'`)).toEqual([]);
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('flows with more steps than caps.flowSteps', () => {
  it('eight 10,000-step flows are refused at INSERT while another role is served within a second', async () => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const huge = JSON.stringify(chain(10_000));
    const attacks = Array.from({ length: 8 }, () =>
      refusedBySize(
        env.client.q(`INSERT INTO stepd.workflows (name, flow) VALUES ('many-steps', $1)`, [huge]),
        new RegExp(`flow defines 10000 steps, above caps\\.flowSteps \\(${DEFAULT_CAPS.flowSteps}\\)`),
      ),
    );
    await otherRoleServedWithinASecond(env, other);
    await Promise.all(attacks);
    await env.bystander.assertUndisturbedAndServed();
  });

  it.each([
    { form: 'stored as JSON text', flow: (n: number) => JSON.stringify(chain(n)) },
    { form: "in the seed's flat form", flow: (n: number) => flatChain(n) },
  ])('a flow $form with too many steps is refused; one at the cap runs', async ({ flow }) => {
    // 200 steps of JSON (8 kB): the database checks values above 4 KiB (smaller ones the executor checks alone).
    const env = await securityEnv({ config: { caps: { flowSteps: 200 } } });
    await refusedBySize(clientInsert(env.client, flow(201)), /defines 201 steps, above caps\.flowSteps \(200\)/);
    const ok = await clientInsert(env.client, flow(200), { input: {} });
    expect((await waitForWorkflow(env.t, ok)).status).toBe('completed');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('a registered flow with too many steps is refused', async () => {
    const env = await securityEnv({ config: { caps: { flowSteps: 200 } } });
    await refusedBySize(env.client.q(`INSERT INTO stepd.flows (name, flow) VALUES ('long', $1)`, [JSON.stringify(chain(201))]), /flow 'long' defines 201 steps/);
    await env.bystander.assertUndisturbedAndServed();
  });
});

/** The seed's flat form: `start` carries the first step with its name. */
function flatChain(n: number): Record<string, unknown> {
  const { steps } = chain(n);
  const out: Record<string, unknown> = {};
  for (const [name, step] of Object.entries(steps)) out[name === 's0' ? 'start' : name] = name === 's0' ? { name, ...(step as object) } : step;
  return out;
}

const A = Array.from({ length: 4_000 }, (_, i) => i);
const B = Array.from({ length: 100_000 }, (_, i) => -i - 1);

describe('every CEL operator is charged', () => {
  it.each([
    { name: 'membership: 4,000 x `in` a 100,000-item list', condition: 'input.a.exists(x, x in input.b)', input: { a: A, b: B } },
    { name: 'equality of two 50,000-item lists in `all`', condition: 'input.a.all(x, input.b == input.c)', input: { a: A, b: B.slice(0, 50_000), c: B.slice(0, 50_000) } },
    { name: 'strings built by `+` in `map`', condition: 'size(input.a.map(x, input.s + "y")) > 0', input: { a: A, s: 'x'.repeat(500_000) } },
    { name: 'nested exists', condition: 'input.a.exists(x, input.a.exists(y, x == y + 100000))', input: { a: A } },
  ])('$name fails its own step with budget_exceeded; another role is served within a second', async ({ condition, input }) => {
    const env = await securityEnv();
    const other = await createClientRole(env.t);
    const flow = { start: 'a', steps: { a: { tool: 'core.noop', branch: [{ if: condition, then: 'b' }], default: 'b' }, b: { tool: 'core.noop', done: true } } };
    const bombs = await Promise.all(Array.from({ length: 3 }, () => clientInsert(env.client, flow, { input })));
    await otherRoleServedWithinASecond(env, other);
    for (const id of bombs) {
      const wf = await waitForWorkflow(env.t, id);
      expect(wf.status).toBe('failed');
      expect(JSON.stringify(wf.error)).toMatch(/budget_exceeded|evaluation budget/);
      expect((await getSteps(env.t, id)).map((s) => s.name)).not.toContain('b');
    }
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('the caps the database applies', () => {
  it("are the executor's config, readable by clients, not writable or lockable by them", async () => {
    const env = await securityEnv({ config: { caps: { inputBytes: 5_000, flowSteps: 77 } } });
    const [caps] = await env.client.q(`SELECT input_bytes::int, result_bytes::int, flow_bytes::int, flow_steps FROM stepd.size_caps`);
    expect(caps).toEqual({ input_bytes: 5_000, result_bytes: DEFAULT_CAPS.resultBytes, flow_bytes: 1024 * 1024, flow_steps: 77 });
    for (const attempt of [
      `UPDATE stepd.size_caps SET input_bytes = 100000000`,
      `DELETE FROM stepd.size_caps`,
      `INSERT INTO stepd.size_caps (id) VALUES (false)`,
      `TRUNCATE stepd.size_caps`,
    ]) {
      const err = await env.client.q(attempt).then(() => undefined, (e: { code?: string }) => e);
      expect(err?.code, attempt).toBe('42501');
    }
    await env.client.session(async (run) => {
      await run('BEGIN');
      const err = await run(`LOCK TABLE stepd.size_caps IN SHARE ROW EXCLUSIVE MODE`).then(() => undefined, (e: { code?: string }) => e);
      expect(err?.code).toBe('42501');
      await run('ROLLBACK');
    });
    await refusedBySize(clientInsert(env.client, ONE_STEP, { input: { blob: 'x'.repeat(6_000) } }), /above caps\.inputBytes \(5000 bytes\)/);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('default to DEFAULT_CAPS before any executor wrote them', async () => {
    const env = await securityEnv();
    const [defaults] = await env.t.q(
      `SELECT column_name, column_default FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'size_caps' AND column_name IN ('input_bytes', 'result_bytes', 'flow_steps')
        ORDER BY column_name`,
      [env.t.schema],
    ).then((rows) => [Object.fromEntries(rows.map((r: { column_name: string; column_default: string }) => [r.column_name, Number(r.column_default)]))]);
    expect(defaults).toEqual({ input_bytes: DEFAULT_CAPS.inputBytes, result_bytes: DEFAULT_CAPS.resultBytes, flow_steps: DEFAULT_CAPS.flowSteps });
    await env.bystander.assertUndisturbedAndServed();
  });
});
