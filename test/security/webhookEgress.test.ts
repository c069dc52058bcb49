/**
 * Notification webhooks obey the egress rules of `http.request` (DESIGN.md §7 "Egress";
 * src/notify/notifier.ts): a hook on loopback — here a real local HTTP server — is refused
 * without a connection, its job failed at once (never retried) with `egress_denied` as its
 * output; the same hook is delivered when `http.allow` names it. A redirect is never followed, so
 * an allowed hook cannot send a delivery on to a refused address.
 */
import { describe, expect, it } from 'vitest';
import { bossSchemaName, NOTIFY_QUEUE } from '../../src/schedules/bossSchema.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import { createTestSchema, insertWorkflow, waitFor, waitForStep, type TestSchema } from '../helpers/db.js';
import { startNotifyStack, startReceiver } from '../notify/helpers.js';
import { startLocalServer } from './helpers.js';

const SECRET = 'egress-hook-secret-8d2f61b0c4';
const GATE = { start: 'review', steps: { review: { approval: true, next: 'ship' }, ship: { tool: 'core.echo', args: {}, done: true } } };

async function notifyJobs(t: TestSchema): Promise<{ state: string; retry_count: number; output: any }[]> {
  const boss = bossSchemaName(t.schema);
  return t.q(`SELECT state, retry_count, output FROM ${boss}.job WHERE name = $1 ORDER BY created_on`, [NOTIFY_QUEUE]);
}

describe('webhooks and egress', () => {
  it('refuses a hook on loopback without connecting: the job fails once with egress_denied, never retried', async () => {
    const t = await createTestSchema();
    const server = await startLocalServer((_req, res) => res.end());
    const stack = await startNotifyStack(t, [{ on: ['step.waiting'], url: `${server.base}/hook`, secret: SECRET }], { egress: new EgressPolicy() });
    const id = await insertWorkflow(t, GATE, {}, { user: 'alice' });
    await waitForStep(t, id, 'review', 'pending');
    const [job] = await waitFor(async () => {
      const jobs = await notifyJobs(t);
      return jobs.length > 0 && jobs[0]!.state === 'failed' ? jobs : undefined;
    }, 'the refused delivery', 30_000);
    expect(job!.output).toMatchObject({ code: 'egress_denied', details: { reason: 'loopback' } });
    expect(job!.retry_count).toBe(0);
    // Past the queue's retry delay (1 s in the stack): still one attempt, no connection.
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await notifyJobs(t)).map((j) => [j.state, j.retry_count])).toEqual([['failed', 0]]);
    expect(server.connections()).toBe(0);
    expect(stack.lines.some((l) => l.includes('egress_denied') && l.includes('not retried'))).toBe(true);
    expect(stack.lines.filter((l) => l.includes(SECRET))).toEqual([]);
  }, 60_000);

  it('delivers to the same loopback hook when http.allow names it', async () => {
    const t = await createTestSchema();
    const rx = await startReceiver(SECRET);
    const port = new URL(rx.url).port;
    await startNotifyStack(t, [{ on: ['step.waiting'], url: rx.url, secret: SECRET }], { egress: new EgressPolicy({ policy: { allow: [`http://127.0.0.1:${port}/`] } }) });
    const id = await insertWorkflow(t, GATE, {}, { user: 'alice' });
    await waitForStep(t, id, 'review', 'pending');
    const d = await waitFor(() => rx.deliveries.find((x) => x.body.workflow?.id === id), 'the webhook', 30_000);
    expect(d.signatureValid).toBe(true);
  }, 60_000);

  it('never follows a redirect from an allowed hook to a refused address', async () => {
    const t = await createTestSchema();
    const inside = await startLocalServer((_req, res) => res.end('{"secret":"internal"}'));
    const redirector = await startLocalServer((_req, res) => {
      res.statusCode = 307;
      res.setHeader('location', `${inside.base}/admin`);
      res.end();
    });
    const stack = await startNotifyStack(t, [{ on: ['step.waiting'], url: `${redirector.base}/hook`, secret: SECRET }], {
      egress: new EgressPolicy({ policy: { allow: [`http://127.0.0.1:${redirector.port}/`] } }),
    });
    const id = await insertWorkflow(t, GATE, {}, { user: 'alice' });
    await waitForStep(t, id, 'review', 'pending');
    await waitFor(() => (redirector.requests.length >= 2 ? true : undefined), 'the hook to be tried and retried', 30_000);
    expect(inside.connections()).toBe(0);
    expect(stack.lines.some((l) => l.includes('answered with an error') && l.includes('307'))).toBe(true);
  }, 60_000);
});
