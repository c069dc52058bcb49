/**
 * Odd values in one batch. Outcomes and new step rows travel to PostgreSQL as one JSON document
 * per batch, so a value PostgreSQL cannot store (a NUL character, a lone surrogate) would refuse
 * the whole statement: the batch is then recorded outcome by outcome, the bad ones fail their
 * attempt with `invalid_result`, and every other value — odd unicode, quotes, backslashes, a large
 * and deeply nested one — is stored exactly as the tool returned it.
 */
import { describe, expect, it } from 'vitest';
import type { ToolProvider } from '../../src/tools/tool.js';
import { createTestSchema, insertWorkflow, startExecutor, waitFor, waitForWorkflow } from '../helpers/db.js';

const ODD = 'ẞ𝔘ñí\u202Eçødé 🧪 "quoted" \\back\\slash \u2028 ﷽ \u0301';

function nested(levels: number): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < levels; i++) v = { d: v };
  return v;
}

/** Each call answers, once the test releases them all in one tick, with the value its `kind` names. */
function oddTools(): ToolProvider & { waiting: number; releaseAll: () => void } {
  const pending: (() => void)[] = [];
  const values: Record<string, () => unknown> = {
    nul: () => ({ text: 'a\u0000b' }),
    surrogate: () => ({ text: 'x\ud800y' }),
    odd: () => ({ text: ODD, [ODD]: [ODD] }),
    big: () => ({ text: 'x'.repeat(200_000), deep: nested(60) }),
  };
  const tools = {
    prefix: 'odd',
    get waiting() {
      return pending.length;
    },
    releaseAll: () => {
      for (const p of pending.splice(0)) p();
    },
    call: (_tool: string, args: unknown) =>
      new Promise((resolve) => pending.push(() => resolve(values[(args as { kind: string }).kind]!()))),
    list: async () => [{ name: 'value' }],
  };
  return tools;
}

const flowFor = (kind: string) => ({
  start: 'get',
  steps: {
    get: { tool: 'odd.value', args: { kind }, retry: { maxAttempts: 1 }, onError: 'handle', next: 'use' },
    use: { tool: 'core.echo', args: { got: '{{steps.get.result}}' }, done: true, output: '{{result.got}}' },
    handle: { tool: 'core.echo', args: { code: '{{error.code}}' }, done: true, output: '{{result}}' },
  },
});

describe('odd values in one batch of outcomes', () => {
  it('fails only the attempts PostgreSQL cannot store, and stores odd unicode, a large and a deep value exactly', async () => {
    const t = await createTestSchema();
    const tools = oddTools();
    await startExecutor(t, { tools: [tools] });
    const ids = {
      nul: await insertWorkflow(t, flowFor('nul')),
      odd: await insertWorkflow(t, flowFor('odd')),
      surrogate: await insertWorkflow(t, flowFor('surrogate')),
      big: await insertWorkflow(t, flowFor('big')),
    };
    await waitFor(() => tools.waiting === 4, 'four calls in flight');
    tools.releaseAll();
    const out = Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([k, id]) => [k, await waitForWorkflow(t, id)] as const)));
    expect(out.nul!.output).toEqual({ code: 'invalid_result' });
    expect(out.surrogate!.output).toEqual({ code: 'invalid_result' });
    expect(out.odd!.status).toBe('completed');
    expect(out.odd!.output).toEqual({ text: ODD, [ODD]: [ODD] });
    expect(out.big!.output).toEqual({ text: 'x'.repeat(200_000), deep: nested(60) });
  });
});
