/**
 * Attack tests of notifications (sql/0032, src/http/approvalLinks.ts, src/notify/): approval
 * links are single use in the database, expire, refuse any change to the URL and links of
 * another step, and obey the gate's approvers and approval.schema; real LOGIN roles (one granted
 * the client role, one with no grants) can neither read the links' hashes nor forge outbox rows
 * for the notifier to send.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { startNotifyStack, startReceiver } from '../notify/helpers.js';
import { createClientRole, createLoginRole, createSecuredSchema, getSteps, insertWorkflow, onCleanup, refused, waitFor, waitForStep, waitForWorkflow } from './helpers.js';

const SECRET = 'hook-secret-attack-0123456789';
const gatedFlow = (approval: Record<string, unknown>) => ({
  start: 'review',
  steps: { review: { approval: { links: true, ...approval }, next: 'ship' }, ship: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } },
});

async function setup(opts: { linkTtlMs?: number } = {}) {
  const t = await createSecuredSchema();
  const rx = await startReceiver(SECRET);
  const stack = await startNotifyStack(t, [{ on: ['step.waiting'], url: rx.url, secret: SECRET }], opts);
  /** Starts a gated workflow and returns its gate and the links its notification carried. */
  const gate = async (approval: Record<string, unknown> = {}, user = 'alice') => {
    const id = await insertWorkflow(t, gatedFlow(approval), {}, { user });
    const step = await waitForStep(t, id, 'review', 'pending');
    const d = await waitFor(() => rx.deliveries.find((x) => x.body.step?.id === step.id), `the notification of gate ${step.id}`, 30_000);
    expect(d.signatureValid).toBe(true);
    return { id, step, links: (d.body.links ?? []) as { user: string; approve: string; reject: string }[] };
  };
  return { t, rx, stack, gate };
}

const post = (url: string) => fetch(url, { method: 'POST' });

describe('approval links', () => {
  it('replay: a used link, and its sibling, are refused (409); the gate was readied once', async () => {
    const { t, gate } = await setup();
    const g = await gate();
    expect((await post(g.links[0]!.reject)).status).toBe(200);
    expect((await waitForWorkflow(t, g.id)).status).toBe('failed');
    for (const url of [g.links[0]!.reject, g.links[0]!.approve]) {
      const again = await post(url);
      expect(again.status).toBe(409);
      expect(await again.text()).toContain('already used');
    }
    expect((await getSteps(t, g.id)).filter((s) => s.name === 'review').map((s) => s.readied_by)).toEqual(['alice']);
    // Concurrent use of both links of a fresh gate: exactly one counts.
    const h = await gate();
    const answers = await Promise.all([post(h.links[0]!.approve), post(h.links[0]!.reject), post(h.links[0]!.approve)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409]);
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.approval_links WHERE step_id = $1 AND used`, [h.step.id]))[0].n).toBe(1);
  }, 60_000);

  it('tamper and wrong step: a changed token, step or action matches nothing (404) and burns nothing', async () => {
    const { t, gate } = await setup();
    const a = await gate();
    const b = await gate();
    const url = new URL(a.links[0]!.approve);
    const [, , stepId, action, token] = url.pathname.split('/');
    const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
    const tries = [
      `${url.origin}/links/${stepId}/${action}/${flip(token!)}`,
      `${url.origin}/links/${stepId}/${action}/${token!.slice(0, -1)}`,
      `${url.origin}/links/${b.step.id}/${action}/${token}`,
      `${url.origin}/links/${stepId}/reject/${token}`,
      `${url.origin}/links/${stepId}/delete/${token}`,
      `${url.origin}/links/0${stepId}/${action}/${token}`,
    ];
    for (const u of tries) {
      for (const method of ['GET', 'POST']) {
        const r = await fetch(u, { method });
        expect(r.status, `${method} ${u}`).toBe(404);
      }
    }
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.approval_links WHERE used_at IS NOT NULL`))[0].n).toBe(0);
    expect((await getSteps(t, b.id))[0]!.status).toBe('pending');
    // The real link still works, and only for its own step.
    expect((await post(a.links[0]!.approve)).status).toBe(200);
    expect((await waitForWorkflow(t, a.id)).status).toBe('completed');
    expect((await getSteps(t, b.id))[0]!.status).toBe('pending');
  }, 60_000);

  it('expired links are refused (410) and change nothing', async () => {
    const { t, gate } = await setup({ linkTtlMs: 60_000 });
    const g = await gate();
    await t.q(`UPDATE stepd.approval_links SET expires_at = now() - interval '1 second' WHERE step_id = $1`, [g.step.id]);
    for (const method of ['GET', 'POST']) expect((await fetch(g.links[0]!.approve, { method })).status).toBe(410);
    expect((await getSteps(t, g.id))[0]!.status).toBe('pending');
  }, 60_000);

  it("obeys the gate: links only for approvers named literally, acting as them; approval.schema refuses the link's approval and the gate waits", async () => {
    const { t, gate } = await setup();
    const patterns = await gate({ approvers: ['ops-*'] });
    expect(patterns.links).toEqual([]);
    expect((await t.q(`SELECT count(*)::int AS n FROM stepd.approval_links WHERE step_id = $1`, [patterns.step.id]))[0].n).toBe(0);

    const two = await gate({ approvers: ['carol', 'dave', 'ops-*'] });
    expect(two.links.map((l) => l.user).sort()).toEqual(['carol', 'dave']);
    expect((await post(two.links.find((l) => l.user === 'dave')!.approve)).status).toBe(200);
    await waitForWorkflow(t, two.id);
    expect((await getSteps(t, two.id))[0]).toMatchObject({ readied_by: 'dave' });

    const schema = await gate({ schema: { type: 'object', required: ['budget'] } });
    const r = await post(schema.links[0]!.approve);
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('approval.schema');
    expect((await getSteps(t, schema.id))[0]!.status).toBe('pending');
    // The link is spent all the same: single use means single use.
    expect((await post(schema.links[0]!.approve)).status).toBe(409);
  }, 60_000);

  it('clients and roles without grants cannot read link hashes, forge links or outbox rows, or call the outbox trigger', async () => {
    const { t, gate } = await setup();
    await gate();
    const client = await createClientRole(t);
    const { url } = await createLoginRole(t, null, `nogrant_${client.role}`);
    const none = new pg.Pool({ connectionString: url, max: 1 });
    none.on('error', () => {});
    onCleanup(() => none.end().catch(() => {}));
    const q = (text: string) => none.query(text.replaceAll('stepd.', `${t.schema}.`));
    for (const run of [client.q, q] as ((text: string) => Promise<unknown>)[]) {
      await refused(run(`SELECT token_sha256 FROM stepd.approval_links`), /permission denied/);
      await refused(run(`INSERT INTO stepd.approval_links (step_id, workflow_id, action, act_as, token_sha256, expires_at) VALUES (1, 1, 'approve', 'carol', decode(repeat('00', 32), 'hex'), now() + interval '1 day')`), /permission denied/);
      await refused(run(`UPDATE stepd.approval_links SET used_at = NULL, used = false`), /permission denied/);
      await refused(run(`INSERT INTO stepd.notification_outbox (kind, workflow_id) VALUES ('workflow.failed', 1)`), /permission denied/);
      await refused(run(`SELECT * FROM stepd.notification_outbox`), /permission denied/);
      await refused(run(`SELECT stepd.stepd_notify_outbox()`), /permission denied|trigger functions can only be called as triggers/);
    }
  }, 60_000);
});
