/**
 * Budgets and caps with a real executor on a real schema: a runaway condition fails its own
 * workflow with `budget_exceeded` while a one-step workflow beside it completes; each of the
 * operator's caps refuses what is above it with an error naming the cap; deep JSON, long names
 * and flows stored as strings get a clear error (or simply run), never "the database refused".
 */
import { describe, expect, it } from 'vitest';
import type { CapsConfig } from '../../src/configFile.js';
import type { Executor } from '../../src/executor/executor.js';
import { createTestSchema, getSteps, insertWorkflow, startExecutor, waitForWorkflow, type TestSchema } from '../helpers/db.js';

/** An executor as `stepd start` builds it with a config's `caps`. */
function startWithCaps(t: TestSchema, caps?: CapsConfig): Promise<Executor> {
  return startExecutor(t, caps ? { caps } : {});
}

function nestedAll(list: string, levels: number): string {
  let expr = 'true';
  for (let i = levels - 1; i >= 0; i--) expr = `${list}.all(v${i}, ${expr})`;
  return expr;
}

function nested(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

const branchOn = (condition: string) => ({
  start: 'a',
  steps: { a: { tool: 'core.noop', branch: [{ if: condition, then: 'b' }], default: 'b' }, b: { tool: 'core.noop', done: true } },
});
const ONE_STEP = { start: 'a', steps: { a: { tool: 'core.echo', args: { beside: true }, done: true, output: '{{result}}' } } };
const BIG = 'x'.repeat(5_000);
const forEachFlow = (concurrency?: number) => ({
  start: 'each',
  steps: {
    each: { forEach: { items: '{{input.items}}', step: 'work', ...(concurrency ? { concurrency } : {}) }, join: 'end' },
    work: { tool: 'core.echo', args: { i: '{{item}}' } },
    end: { tool: 'core.noop', done: true },
  },
});
const items = (n: number) => Array.from({ length: n }, (_, i) => i);

async function insertRawFlow(t: TestSchema, flowSql: string, value: string, name = 'raw'): Promise<string> {
  const rows = await t.q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow) VALUES ($1, ${flowSql}) RETURNING id`, [name, value]);
  return rows[0]!.id;
}

describe('CEL budgets with a real executor', () => {
  it('a comprehension bomb over the input fails its workflow with budget_exceeded; a one-step workflow beside it completes', async () => {
    const t = await createTestSchema();
    await startWithCaps(t);
    const bomb = await insertWorkflow(t, branchOn(nestedAll('input.l', 3)), { l: items(1_000) });
    const beside = await insertWorkflow(t, ONE_STEP);
    const done = await waitForWorkflow(t, beside);
    expect(done.status).toBe('completed');
    expect(done.output).toEqual({ beside: true });
    const failed = await waitForWorkflow(t, bomb);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'budget_exceeded', retryable: false, step: 'a' });
    expect(failed.error!.message).toMatch(/evaluation budget of 100000 units/);
    expect((await getSteps(t, bomb)).map((s) => s.name)).toEqual(['a']);
  });

  it('the eight-level bomb over literal lists is refused at admission as invalid_flow at its path, before any step', async () => {
    const t = await createTestSchema();
    await startWithCaps(t);
    const id = await insertWorkflow(t, branchOn(nestedAll('[1,2,3,4,5,6,7,8,9,10]', 8)));
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'invalid_flow', issues: [{ path: 'steps.a.branch[0].if' }] });
    expect(JSON.stringify(wf.error)).toMatch(/budget/);
    expect(await getSteps(t, id)).toEqual([]);
  });
});

describe("the operator's caps with a real executor", () => {
  it.each([
    { cap: 'steps', caps: { steps: 20 }, flow: { maxSteps: 1_000_000, start: 'a', steps: { a: { tool: 'core.noop', done: true } } }, input: {}, code: 'invalid_flow' },
    { cap: 'forEachConcurrency', caps: { forEachConcurrency: 4 }, flow: forEachFlow(50), input: { items: items(5) }, code: 'invalid_flow' },
    { cap: 'inputBytes', caps: { inputBytes: 1_000 }, flow: ONE_STEP, input: { blob: BIG }, code: 'cap_exceeded' },
  ])('a workflow above caps.$cap fails at admission with $code naming the cap, before any step', async ({ cap, caps, flow, input, code }) => {
    const t = await createTestSchema();
    // Inserted before the executor writes its lower caps into the database (sql/0021 would refuse
    // the input at INSERT afterwards): admission checks what the database let through.
    const id = await insertWorkflow(t, flow, input);
    await startWithCaps(t, caps);
    const beside = await insertWorkflow(t, ONE_STEP);
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error!.code).toBe(code);
    expect(JSON.stringify(wf.error)).toContain(`caps.${cap}`);
    expect(await getSteps(t, id)).toEqual([]);
    expect((await waitForWorkflow(t, beside)).status).toBe('completed');
  });

  it('a forEach over more items than caps.forEachItems fails with cap_exceeded when it fans out, starting no item', async () => {
    const t = await createTestSchema();
    await startWithCaps(t, { forEachItems: 10 });
    const id = await insertWorkflow(t, forEachFlow(), { items: items(50) });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'cap_exceeded', step: 'each', details: { cap: 'forEachItems', limit: 10, actual: 50 } });
    expect((await getSteps(t, id)).filter((s) => s.name === 'work')).toEqual([]);
    const fits = await insertWorkflow(t, forEachFlow(), { items: items(10) });
    expect((await waitForWorkflow(t, fits)).status).toBe('completed');
  });

  it('a step result above caps.resultBytes fails the step once (not retried) naming the cap', async () => {
    const t = await createTestSchema();
    await startWithCaps(t, { resultBytes: 1_000 });
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { blob: BIG }, done: true } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'cap_exceeded', step: 'a', details: { cap: 'resultBytes', limit: 1_000 } });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.name, s.attempt, s.status])).toEqual([['a', 1, 'failed']]);
    expect(steps[0]!.result).toBeNull();
  });

  it('an output above caps.outputBytes fails the workflow, with or without an output template', async () => {
    const t = await createTestSchema();
    await startWithCaps(t, { outputBytes: 1_000 });
    const templated = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { blob: BIG }, done: true, output: '{{result}}' } } });
    const lastStep = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { blob: BIG } } } });
    for (const id of [templated, lastStep]) {
      const wf = await waitForWorkflow(t, id);
      expect(wf.status).toBe('failed');
      expect(wf.error).toMatchObject({ code: 'cap_exceeded', details: { cap: 'outputBytes' } });
      expect(wf.output).toBeNull();
    }
  });

  it('a loop without maxSteps stops at caps.steps with step_limit', async () => {
    const t = await createTestSchema();
    await startWithCaps(t, { steps: 20 });
    const id = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.noop', next: 'a' } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'step_limit' });
    expect((await getSteps(t, id)).length).toBe(20);
  });
});

describe('odd rows get a reason, never "the database refused"', () => {
  it('deep flows, deep input, long names and a string that is not JSON fail with clear codes; a JSON object in a string runs', async () => {
    const t = await createTestSchema();
    await startWithCaps(t);
    const deepFlow = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { x: nested(3_000) } } } });
    const deepInput = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: { x: '{{input}}' } } } }, { x: nested(3_000) });
    const emoji = await insertRawFlow(t, 'to_jsonb($2::text)', '🙂{"start":"a","steps":{"a":{"tool":"core.echo"}}}');
    const asText = await insertRawFlow(t, 'to_jsonb($2::text)', '{"start":"a","steps":{"a":{"tool":"core.echo","args":{"ok":true}}}}');
    const doubleText = await insertRawFlow(t, 'to_jsonb($2::text)', JSON.stringify(JSON.stringify({ start: 'a', steps: { a: { tool: 'core.noop' } } })));
    const longStep = 's'.repeat(8_000);
    const longStepName = await insertWorkflow(t, { start: longStep, steps: { [longStep]: { tool: 'core.noop' } } });
    const longName = await insertWorkflow(t, ONE_STEP, {}, { name: 'n'.repeat(8_000) });

    const outcome = async (id: string) => {
      const wf = await waitForWorkflow(t, id);
      expect(JSON.stringify(wf.error ?? {})).not.toMatch(/database refused|admission_failed/);
      return wf;
    };
    expect((await outcome(deepFlow)).error).toMatchObject({ code: 'invalid_flow', issues: [{ message: 'flow nests deeper than 100 levels' }] });
    expect((await outcome(deepInput)).error).toMatchObject({ code: 'cap_exceeded', details: { cap: 'jsonDepth' } });
    expect((await outcome(emoji)).error).toMatchObject({ code: 'invalid_flow', issues: [{ path: '' }] });
    expect((await outcome(asText)).output).toEqual({ ok: true });
    expect((await outcome(doubleText)).error).toMatchObject({ code: 'invalid_flow', issues: [{ message: 'flow must be a JSON object, but it is JSON text encoded twice' }] });
    expect((await outcome(longStepName)).error).toMatchObject({ code: 'invalid_flow' });
    expect(JSON.stringify((await outcome(longStepName)).error)).toMatch(/at most 200 bytes/);
    expect((await outcome(longName)).error).toMatchObject({ code: 'invalid_name' });
    for (const id of [deepFlow, deepInput, emoji, doubleText, longStepName, longName]) expect(await getSteps(t, id)).toEqual([]);
  });
});
