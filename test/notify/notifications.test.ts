/**
 * Webhooks end to end: a gate waiting and a workflow failing are delivered through pg-boss to a
 * real local receiver that verifies the HMAC signature; a delivery the receiver refuses is
 * retried; a gate with `approval.links` carries single-use approve and reject links that the
 * daemon's HTTP serves; the secret appears in no log line.
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema, getSteps, insertWorkflow, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { startNotifyStack, startReceiver } from './helpers.js';

const SECRET = 'hook-secret-4f1c9a7e2b6d8053';
const GATED = {
  start: 'review',
  steps: {
    review: { approval: { message: 'Ship {{input.version}}?', approvers: ['carol'], links: true }, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: '{{input.version}}' }, done: true, output: '{{result}}' },
  },
};

describe('notifications', () => {
  it('delivers step.waiting with approval links, signed, retried after a refusal; the approve link works once', async () => {
    const t = await createTestSchema();
    const rx = await startReceiver(SECRET);
    const stack = await startNotifyStack(t, [{ on: ['step.waiting', 'workflow.failed'], url: rx.url, secret: SECRET }]);
    rx.failNext(1);
    const id = await insertWorkflow(t, GATED, { version: '1.2' }, { name: 'release', user: 'alice' });
    const gate = await waitForStep(t, id, 'review', 'pending');

    const ok = await waitFor(() => rx.deliveries.find((d) => d.status === 204), 'a delivery the receiver accepted', 30_000);
    // The first attempt was refused (500) and pg-boss tried again, with the same delivery id.
    expect(rx.deliveries[0]!.status).toBe(500);
    expect(rx.deliveries[0]!.headers['x-stepd-delivery']).toBe(ok.headers['x-stepd-delivery']);
    expect(rx.deliveries.every((d) => d.signatureValid)).toBe(true);
    expect(ok.headers['x-stepd-event']).toBe('step.waiting');
    expect(ok.body).toMatchObject({
      type: 'step.waiting',
      schema: t.schema,
      workflow: { id, name: 'release', user: 'alice' },
      step: { id: gate.id, name: 'review', message: 'Ship 1.2?', approvers: ['carol'] },
    });
    const links = ok.body.links as { user: string; approve: string; reject: string }[];
    expect(links.map((l) => l.user)).toEqual(['carol']);
    expect(links[0]!.approve.startsWith(`${stack.httpUrl}/links/${gate.id}/approve/`)).toBe(true);

    // GET only shows the button; nothing changes.
    const shown = await fetch(links[0]!.approve);
    expect(shown.status).toBe(200);
    expect(await shown.text()).toContain('approve step');
    expect((await getSteps(t, id))[0]!.status).toBe('pending');

    const used = await fetch(links[0]!.approve, { method: 'POST' });
    expect(used.status).toBe(200);
    expect(await used.text()).toContain('approved as carol');
    const done = await waitForWorkflow(t, id);
    expect(done.status).toBe('completed');
    expect((await getSteps(t, id))[0]).toMatchObject({ readied_by: 'carol' });
    expect((await fetch(links[0]!.approve, { method: 'POST' })).status).toBe(409);
    expect((await fetch(links[0]!.reject, { method: 'POST' })).status).toBe(409);

    // workflow.failed, signed too.
    const failing = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { code: 'boom', message: 'it broke' }, done: true } } }, {}, { name: 'broken' });
    await waitForWorkflow(t, failing);
    const failed = await waitFor(() => rx.deliveries.find((d) => d.body.type === 'workflow.failed'), 'workflow.failed', 30_000);
    expect(failed.signatureValid).toBe(true);
    expect(failed.body).toMatchObject({ workflow: { id: failing, name: 'broken' }, error: { code: 'boom', message: expect.stringContaining('it broke') } });

    // The secret was never written to a log line (deliveries, retries and link use were all logged).
    expect(stack.lines.some((l) => l.includes('webhook delivered'))).toBe(true);
    expect(stack.lines.some((l) => l.includes('retries'))).toBe(true);
    expect(stack.lines.filter((l) => l.includes(SECRET))).toEqual([]);
    // Drained: the outbox is empty once the events are queued.
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.notification_outbox`))[0].n).toBe(0);
  }, 60_000);

  it('only the events a hook asks for; a wait that is no gate (a signal) is not notified as one', async () => {
    const t = await createTestSchema();
    const rx = await startReceiver(SECRET);
    await startNotifyStack(t, [{ on: ['workflow.failed'], url: rx.url, secret: SECRET }]);
    const gated = await insertWorkflow(t, GATED, { version: '2' }, { user: 'alice' });
    await waitForStep(t, gated, 'review', 'pending');
    const waiting = await insertWorkflow(t, { start: 'w', steps: { w: { signal: { name: 'never' }, done: true } } });
    await waitForStep(t, waiting, 'w', 'pending');
    const failing = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.fail', args: { message: 'x' }, done: true } } });
    await waitForWorkflow(t, failing);
    await waitFor(() => rx.deliveries.length >= 1, 'the failure', 30_000);
    await waitFor(async () => (await t.q(`SELECT count(*)::int AS n FROM stepd.notification_outbox`))[0].n === 0, 'the outbox drained');
    expect(rx.deliveries.map((d) => d.body.type)).toEqual(['workflow.failed']);
  }, 60_000);
});
