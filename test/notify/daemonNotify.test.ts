/**
 * Notifications from `stepd start` as a user runs it (the built CLI as a child process, config
 * `notify` and `retention`): a gate's webhook reaches a real local receiver, signed with the
 * secret from the environment; its approve link, served by the daemon's HTTP, approves the gate
 * once; the secret is in none of the daemon's output; SIGTERM stops it cleanly.
 */
import { describe, expect, it } from 'vitest';
import { envFor, spawnCli, writeJson } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, waitFor, waitForWorkflow } from '../helpers/db.js';
import { startReceiver } from './helpers.js';

const READY = /stepd: dashboard at (http:\/\/[^\s]+:\d+)\//;
const SECRET = 'daemon-hook-secret-5b0e7c2a91';

describe('stepd start with notify', () => {
  it('delivers a signed step.waiting whose approve link the daemon serves, once', async () => {
    const t = await createTestSchema();
    const rx = await startReceiver(SECRET);
    const config = await writeJson({ notify: [{ on: ['step.waiting'], url: rx.url, secret: '${HOOK_SECRET}' }], retention: { completed: '30d' }, http: { allow: ['http://127.0.0.1:*'] } }, 'stepd.config.json');
    const daemon = spawnCli(['start', '--http', '0', '--config', config], { env: { ...envFor(t), HOOK_SECRET: SECRET, STEPD_LOG_LEVEL: 'debug' } });
    const base = (await daemon.waitFor(READY))[1]!;
    const id = await insertWorkflow(t, { start: 'review', steps: { review: { approval: { links: true }, next: 'ship' }, ship: { tool: 'core.echo', args: { ok: true }, done: true, output: '{{result}}' } } }, {}, { user: 'alice' });
    const d = await waitFor(() => rx.deliveries.find((x) => x.body.workflow?.id === id), 'the webhook', 30_000);
    expect(d.signatureValid).toBe(true);
    const link = (d.body.links as { user: string; approve: string }[])[0]!;
    expect(link.user).toBe('alice');
    expect(link.approve.startsWith(`${base}/links/`)).toBe(true);
    expect((await fetch(link.approve, { method: 'POST' })).status).toBe(200);
    expect((await waitForWorkflow(t, id)).output).toEqual({ ok: true });
    expect((await fetch(link.approve, { method: 'POST' })).status).toBe(409);
    // The delivery is counted in the daemon's /metrics.
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('stepd_notifications_sent_total{event="step.waiting"} 1');
    const { stderr, stdout } = await daemon.kill('SIGTERM');
    expect(stderr + stdout).not.toContain(SECRET);
    expect(stderr).toMatch(/notifications running/);
  }, 60_000);
});
