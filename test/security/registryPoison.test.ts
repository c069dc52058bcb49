/**
 * The flow registry as a way to poison admission for everyone: a client registers flows that are
 * deeply nested, over the flow size limit, or named with control and bidi characters (refused by
 * the registry since sql/0023), and starts them by name (with odd versions too). Each fails on
 * its own with a clear error; the executor
 * keeps admitting and serving everyone else.
 */
import { describe, expect, it } from 'vitest';
import { assertServing, getSteps, refused, securityEnv, waitForWorkflow } from './helpers.js';

const step = (args: string) => `{"start":"a","steps":{"a":{"tool":"core.echo","args":${args},"done":true}}}`;

describe('registered flows cannot poison admission', () => {
  it('deep, oversized and oddly named registered flows fail alone; everyone else is served', async () => {
    const env = await securityEnv();
    const q = env.client.q;
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    const big = JSON.stringify({ x: 'x'.repeat(2 * 1024 * 1024) });
    // Over the 1 MiB flow size limit: refused by the database at INSERT (sql/0021).
    const err = await q(`INSERT INTO stepd.flows (name, flow) VALUES ('big', $1::jsonb)`, [step(big)]).then(
      () => undefined,
      (e: { code?: string; message: string }) => e,
    );
    expect(err).toMatchObject({ code: '54000', message: expect.stringContaining('above the flow size limit (1048576 bytes)') });
    const flows: [string, string][] = [
      ['deep', step(`{"x":${deep}}`)],
    ];
    for (const [name, flow] of flows) await q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2::jsonb)`, [name, flow]);
    // Control, bidi and zero-width names are refused by the registry itself (sql/0023, flowNames.test.ts).
    const odd = ['line\nbreak', 'rtl\u202eyap', 'zero\u200bwidth'];
    for (const name of odd) await refused(q(`INSERT INTO stepd.flows (name, flow) VALUES ($1, $2::jsonb)`, [name, step('{}')]), /invisible, format or direction characters/);
    const ids: Record<string, string> = {};
    for (const name of [...flows.map(([n]) => n), ...odd]) ids[name] = (await q<{ id: string }>(`INSERT INTO stepd.workflows (name, input) VALUES ($1, '{}') RETURNING id`, [name]))[0]!.id;
    ids['version'] = (await q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow_version, input) VALUES ('deep', 2147483647, '{}') RETURNING id`))[0]!.id;

    const outcome: Record<string, unknown> = {};
    for (const [name, id] of Object.entries(ids)) {
      const wf = await waitForWorkflow(env.t, id, undefined, 30_000);
      outcome[name] = [wf.status, (wf.error as { code?: string } | null)?.code ?? null];
    }
    expect(outcome).toMatchObject({
      deep: ['failed', 'invalid_flow'],
      version: ['failed', 'unknown_flow'],
    });
    // Workflows naming them name no registered flow.
    expect(outcome['line\nbreak']).toEqual(['failed', 'unknown_flow']);
    expect(outcome['rtl\u202eyap']).toEqual(['failed', 'unknown_flow']);
    expect(outcome['zero\u200bwidth']).toEqual(['failed', 'unknown_flow']);
    for (const id of [ids.deep!, ids.version!]) expect(await getSteps(env.t, id)).toEqual([]);
    await assertServing(env.t);
    await env.bystander.assertUndisturbedAndServed();
  });

  it('an absurdly large flow or input is refused by the database at INSERT, before the executor could load it', async () => {
    const env = await securityEnv();
    const q = env.client.q;
    // 17 MiB of JSON text: over the database's 16 MiB ceiling on a flow (the executor's own limit is 1 MiB).
    const huge = step(JSON.stringify({ x: 'x'.repeat(17 * 1024 * 1024) }));
    // Refused by the caps checked in SQL (sql/0021, SQLSTATE 54000) before the ceilings of sql/0017 are reached.
    await sizeRefused(q(`INSERT INTO stepd.flows (name, flow) VALUES ('huge', $1::jsonb)`, [huge]), /above the flow size limit/);
    await sizeRefused(q(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('huge', $1::jsonb, '{}')`, [huge]), /above the flow size limit/);
    // 65 MiB of input: over the 64 MiB ceiling (caps.inputBytes may be at most 8 MiB).
    const bigInput = JSON.stringify({ x: 'x'.repeat(65 * 1024 * 1024) });
    await sizeRefused(q(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('big-input', $1::jsonb, $2::jsonb)`, [step('{}'), bigInput]), /above caps\.inputBytes/);
    const [small] = await q<{ id: string }>(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('small', $1::jsonb, '{}') RETURNING id`, [step('{}')]);
    await sizeRefused(q(`UPDATE stepd.workflows SET input = $2::jsonb WHERE id = $1`, [small!.id, bigInput]), /above caps\.inputBytes|may not be changed|only a workflow that is still/);
    expect(await q(`SELECT name FROM stepd.flows WHERE name = 'huge'`)).toEqual([]);
    expect(await q(`SELECT id FROM stepd.workflows WHERE name IN ('huge', 'big-input')`)).toEqual([]);
    await assertServing(env.t);
    await env.bystander.assertUndisturbedAndServed();
  });
});

/** Refused by a size check: the caps in SQL (54000) or a guard (23514, 42501). */
async function sizeRefused(promise: Promise<unknown>, rule: RegExp): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: { code?: string; message: string }) => e,
  );
  expect(err, `expected the write to be refused (${rule})`).toBeDefined();
  expect(['54000', '23514', '42501']).toContain(err!.code);
  expect(err!.message).toMatch(rule);
}
