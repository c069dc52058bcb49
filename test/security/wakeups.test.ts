/**
 * NOTIFY needs no privilege: any role may send on `stepd_wakeup`. A client forging wake-ups —
 * garbage, payloads of the wrong shape naming this schema, ids that are not ids, a flood — can
 * make the executor look, never act: no workflow changes, and it keeps serving.
 * Deeply nested input is refused by the database or by admission, never by a crash.
 */
import { describe, expect, it } from 'vitest';
import { clientInsert, getSteps, getWorkflow, insertWorkflow, securityEnv, waitForStep, waitForWorkflow } from './helpers.js';

describe('forged wake-ups', () => {
  it('garbage, wrong shapes and a flood on stepd_wakeup change nothing and the executor keeps serving', async () => {
    const env = await securityEnv();
    const gated = await insertWorkflow(env.t, { start: 'g', steps: { g: { approval: true, next: 'e' }, e: { tool: 'core.noop', done: true } } }, {}, { user: 'victim' });
    const gate = await waitForStep(env.t, gated, 'g', 'pending');
    const s = env.t.schema;
    const payloads = [
      'not json',
      '{"schema":',
      'null',
      '[]',
      JSON.stringify({ schema: s }),
      JSON.stringify({ schema: s, table: 'workflow_steps', id: Number(gate.id), status: 'ready' }),
      JSON.stringify({ schema: s, table: 'workflow_steps', id: { $gt: 0 }, status: 'ready' }),
      JSON.stringify({ schema: s, table: 'workflows', id: "1; DROP TABLE workflows", status: 'new' }),
      JSON.stringify({ schema: s, table: 'pg_authid', id: -1, status: 'running' }),
      JSON.stringify({ schema: s, table: 'workflow_steps', id: 1e308, status: 'ready' }),
      JSON.stringify({ schema: s, table: 'workflow_steps', id: 'x'.repeat(7_000), status: 'ready' }),
    ];
    for (const p of payloads) await env.client.q(`SELECT pg_notify('stepd_wakeup', $1)`, [p]);
    await env.client.q(`SELECT pg_notify('stepd_wakeup', $1) FROM generate_series(1, 2000) g`, [JSON.stringify({ schema: s, table: 'workflows', id: 1, status: 'new' })]);

    // The gate was not opened by a wake-up that claimed it was ready.
    expect((await getSteps(env.t, gated)).map((r) => [r.name, r.status])).toEqual([['g', 'pending']]);
    expect((await getWorkflow(env.t, gated)).status).toBe('running');
    const after = await clientInsert(env.client, { start: 'a', steps: { a: { tool: 'core.echo', args: { ok: 1 }, done: true, output: '{{result}}' } } });
    expect(await waitForWorkflow(env.t, after)).toMatchObject({ status: 'completed', output: { ok: 1 } });
    await env.bystander.assertUndisturbedAndServed();
  });
});

describe('hostile input shapes', () => {
  it('a deeply nested input is refused by the database or at admission, and the executor keeps serving', async () => {
    const env = await securityEnv();
    const deep = '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000);
    const inserted = await env.client
      .q(`INSERT INTO stepd.workflows (name, flow, input) VALUES ('deep', $1, $2::jsonb) RETURNING id`, [
        JSON.stringify({ start: 'a', steps: { a: { tool: 'core.echo', args: { v: '{{input}}' }, done: true } } }),
        `{"v":${deep}}`,
      ])
      .then(
        (rows) => rows[0]!.id as string,
        (err: { code?: string }) => err,
      );
    if (typeof inserted === 'string') {
      const wf = await waitForWorkflow(env.t, inserted);
      expect(wf.status).toBe('failed');
      expect(['cap_exceeded', 'invalid_input', 'invalid_flow']).toContain(wf.error!.code);
    } else {
      expect(inserted.code).toMatch(/^(54001|22P02|54000)$/);
    }
    await env.bystander.assertUndisturbedAndServed();
  });
});
