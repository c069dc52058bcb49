/**
 * Steps that wait for a signal (issue 21, item 2), against the real database and a real executor,
 * signals sent by a real LOGIN role granted `<schema>_client`:
 * - since "workflow" receives a signal sent before the wait began; since "step" does not;
 * - a loop's waits consume different signals; two workflows on one key both receive one signal;
 * - a list of names routes on result.name; a timeout fails with signal_timeout, routed by onError;
 * - a rolled-back insert wakes nothing; a client cannot ready a wait by hand;
 * - races: signals inserted while the waits are being created — every wait gets exactly one
 *   signal, none twice, none missed (by key, and many waits of one workflow on one name).
 */
import { describe, expect, it } from 'vitest';
import { clientInsert, getSteps, refused, securityEnv, waitFor, waitForStep, waitForWorkflow, type ClientRole } from './helpers.js';

const send = async (client: ClientRole, name: string, key: string | null = null, payload: object = {}): Promise<string> =>
  (await client.q<{ id: string }>(`INSERT INTO stepd.signals (name, key, payload) VALUES ($1, $2, $3) RETURNING id::text`, [name, key, JSON.stringify(payload)]))[0]!.id;

/** A gate `hold`, then a wait `w` (approve the gate to start waiting), ending with the signal. */
function heldWait(signal: object): object {
  return {
    start: 'hold',
    steps: {
      hold: { approval: true, next: 'w' },
      w: { signal, done: true, output: '{{result}}' },
    },
  };
}

describe('a signal step', () => {
  it('since "workflow" receives a signal sent before the wait began; since "step" does not, and takes the next one', async () => {
    const env = await securityEnv();
    const a = await clientInsert(env.client, heldWait({ name: 'payment.received', key: '{{input.order}}' }), { input: { order: 'o-1' } });
    const b = await clientInsert(env.client, heldWait({ name: 'payment.received', key: '{{input.order}}', since: 'step' }), { input: { order: 'o-2' } });
    const holdA = await waitForStep(env.t, a, 'hold', 'pending');
    const holdB = await waitForStep(env.t, b, 'hold', 'pending');
    const early1 = await send(env.client, 'payment.received', 'o-1', { amount: 1200 });
    await send(env.client, 'payment.received', 'o-2', { amount: 1 });
    await env.t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = ANY($1::bigint[])`, [[holdA.id, holdB.id]]);
    const doneA = await waitForWorkflow(env.t, a);
    expect(doneA.status, JSON.stringify(doneA.error)).toBe('completed');
    expect(doneA.output).toMatchObject({ id: early1, name: 'payment.received', key: 'o-1', payload: { amount: 1200 }, role: env.client.role });
    expect(typeof (doneA.output as { at: unknown }).at).toBe('string');
    // b waits: the signal for o-2 came before its step.
    const waiting = await waitForStep(env.t, b, 'w', 'pending');
    expect(waiting.tool).toBeNull();
    expect(waiting.args).toMatchObject({ signal: { names: ['payment.received'], key: 'o-2' } });
    expect(new Date((waiting.args as { signal: { since: string } }).signal.since).getTime()).toBe(new Date(waiting.created_at).getTime());
    const late = await send(env.client, 'payment.received', 'o-2', { amount: 2 });
    const doneB = await waitForWorkflow(env.t, b);
    expect(doneB.output).toMatchObject({ id: late, payload: { amount: 2 } });
    await env.bystander.assertUndisturbedAndServed();
  });

  it("a loop's waits consume two different signals, oldest first", async () => {
    const env = await securityEnv();
    const flow = {
      start: 'hold',
      steps: {
        hold: { approval: true, next: 'w' },
        w: { signal: { name: 'tick' }, branch: [{ if: 'result.payload.last == true', then: 'end' }], default: 'w' },
        end: { done: true, output: '{{steps.w.result}}' },
      },
    };
    const id = await clientInsert(env.client, flow);
    const hold = await waitForStep(env.t, id, 'hold', 'pending');
    const first = await send(env.client, 'tick', 'any-key', { last: false });
    const second = await send(env.client, 'tick', null, { last: true });
    await env.t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [hold.id]);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    const waits = (await getSteps(env.t, id)).filter((s) => s.name === 'w');
    expect(waits.map((s) => [s.status, (s.result as { id: string }).id])).toEqual([
      ['done', first],
      ['done', second],
    ]);
  });

  it('two workflows waiting on the same key both receive one signal; a list of names routes on result.name', async () => {
    const env = await securityEnv();
    const flow = {
      start: 'w',
      steps: {
        w: { signal: { name: ['payment.received', 'order.cancelled'], key: '{{input.order}}' }, branch: [{ if: 'result.name == "order.cancelled"', then: 'cancelled' }], default: 'paid' },
        paid: { done: true, output: { outcome: 'paid', signal: '{{steps.w.result.id}}' } },
        cancelled: { done: true, output: { outcome: 'cancelled', signal: '{{steps.w.result.id}}' } },
      },
    };
    const one = await clientInsert(env.client, flow, { input: { order: 'o-7' } });
    const two = await clientInsert(env.client, flow, { input: { order: 'o-7' } });
    const other = await clientInsert(env.client, flow, { input: { order: 'o-8' } });
    for (const id of [one, two, other]) await waitForStep(env.t, id, 'w', 'pending');
    const cancel = await send(env.client, 'order.cancelled', 'o-7');
    for (const id of [one, two]) {
      const wf = await waitForWorkflow(env.t, id);
      expect(wf.output).toEqual({ outcome: 'cancelled', signal: cancel });
    }
    expect((await getSteps(env.t, other)).map((s) => s.status)).toEqual(['pending']);
    const paid = await send(env.client, 'payment.received', 'o-8');
    expect((await waitForWorkflow(env.t, other)).output).toEqual({ outcome: 'paid', signal: paid });
  });

  it('a timeout fails the step with signal_timeout (not retryable) and onError routes it', async () => {
    const env = await securityEnv();
    const flow = {
      start: 'w',
      steps: {
        w: { signal: { name: 'never.sent', timeout: '300ms' }, onError: 'late', done: true },
        late: { done: true, output: { late: true, code: '{{error.code}}' } },
      },
    };
    const id = await clientInsert(env.client, flow);
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    expect(wf.output).toEqual({ late: true, code: 'signal_timeout' });
    const [w] = (await getSteps(env.t, id)).filter((s) => s.name === 'w');
    expect(w!.status).toBe('failed');
    expect(w!.error).toMatchObject({ code: 'signal_timeout', retryable: false });
    // A signal after the timeout changes nothing.
    await send(env.client, 'never.sent');
    expect((await getSteps(env.t, id)).find((s) => s.name === 'w')!.status).toBe('failed');
  });

  it('a rolled-back insert wakes nothing; a client cannot ready a wait by hand', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, heldWait({ name: 'payment.received', key: 'o-9' }).valueOf() as object);
    const hold = await waitForStep(env.t, id, 'hold', 'pending');
    await env.t.q(`UPDATE stepd.workflow_steps SET status = 'ready' WHERE id = $1`, [hold.id]);
    const w = await waitForStep(env.t, id, 'w', 'pending');
    await env.client.session(async (run) => {
      await run('BEGIN');
      await run(`INSERT INTO stepd.signals (name, key) VALUES ('payment.received', 'o-9')`);
      // Readied inside the transaction that inserted it…
      expect((await run(`SELECT status FROM stepd.workflow_steps WHERE id = $1`, [w.id]))[0]!.status).toBe('ready');
      await run('ROLLBACK');
    });
    // …and not at all once it rolled back.
    expect(await env.t.q(`SELECT status, result FROM stepd.workflow_steps WHERE id = $1`, [w.id])).toEqual([{ status: 'pending', result: null }]);
    expect(await env.t.q(`SELECT count(*)::int AS n FROM stepd.signal_consumptions`)).toEqual([{ n: 0 }]);
    await refused(
      env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = '{"id": "1", "name": "payment.received"}' WHERE id = $1`, [w.id]),
      /waits for a signal/,
    );
    const real = await send(env.client, 'payment.received', 'o-9');
    expect((await waitForWorkflow(env.t, id)).output).toMatchObject({ id: real });
  });
});

describe('signals inserted while waits are being created', () => {
  it('every keyed wait gets exactly one signal: none twice, none missed', async () => {
    const env = await securityEnv();
    const n = 40;
    const flow = {
      start: 'prep',
      steps: {
        prep: { tool: 'core.noop', next: 'w' },
        w: { signal: { name: 'race', key: '{{input.k}}' }, done: true, output: '{{result}}' },
      },
    };
    const ids = await Promise.all(Array.from({ length: n }, (_, i) => clientInsert(env.client, flow, { input: { k: `k${i}` } })));
    // While the executor admits them and creates their waits, from three connections.
    const sent = new Map<string, string>();
    await Promise.all(
      [0, 1, 2].map(async (lane) => {
        for (let i = lane; i < n; i += 3) sent.set(`k${i}`, await send(env.client, 'race', `k${i}`));
      }),
    );
    const outputs = await Promise.all(ids.map((id) => waitForWorkflow(env.t, id)));
    outputs.forEach((wf, i) => {
      expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
      expect(wf.output).toMatchObject({ key: `k${i}`, id: sent.get(`k${i}`) });
    });
    expect(await env.t.q(`SELECT count(*)::int AS n, count(DISTINCT signal_id)::int AS signals FROM stepd.signal_consumptions`)).toEqual([{ n, signals: n }]);
  });

  it("one workflow's many waits on one name, racing as many signals: each signal consumed once, none missed", async () => {
    const env = await securityEnv();
    const n = 30;
    // Thirty branches each wait for "burst" (no key): each must take a different signal.
    const steps: Record<string, unknown> = { fan: { parallel: Array.from({ length: n }, (_, i) => `b${i}`), join: 'end' }, end: { tool: 'core.echo', args: { r: '{{results}}' }, done: true, output: '{{result.r}}' } };
    for (let i = 0; i < n; i++) steps[`b${i}`] = { signal: { name: 'burst' } };
    const id = await clientInsert(env.client, { start: 'fan', steps });
    const sent = await Promise.all(
      [0, 1, 2].map(async (lane) => {
        const mine: string[] = [];
        for (let i = lane; i < n; i += 3) mine.push(await send(env.client, 'burst'));
        return mine;
      }),
    );
    const wf = await waitForWorkflow(env.t, id);
    expect(wf.status, JSON.stringify(wf.error)).toBe('completed');
    const got = Object.values(wf.output as Record<string, { id: string }>).map((r) => r.id);
    expect(new Set(got).size).toBe(n);
    expect([...got].sort()).toEqual(sent.flat().sort());
    await waitFor(async () => (await getSteps(env.t, id)).every((s) => s.status === 'done'), 'every step done');
  });
});
