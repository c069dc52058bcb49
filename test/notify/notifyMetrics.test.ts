/**
 * Webhook deliveries in /metrics: `stepd_notifications_sent_total{event}` and
 * `stepd_notifications_failed_total{event, reason}` (reason `http_error`: a non-2xx answer;
 * `unreachable`: no answer), counted by the notifier as pg-boss works its queue. Both start at 0
 * for every event, so a dashboard sees them before the first delivery.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { NotifyMetrics } from '../../src/telemetry/notifyMetrics.js';
import { createTestSchema, insertWorkflow, waitFor, waitForWorkflow } from '../helpers/db.js';
import { parsePromText } from '../telemetry/promText.js';
import { startNotifyStack, startReceiver } from './helpers.js';

const SECRET = 'hook-secret-9d2e7c4b1a6f3058';
const FAILS = { start: 'a', steps: { a: { tool: 'core.fail', args: { code: 'boom', message: 'it broke' }, done: true } } };

async function values(registry: Registry): Promise<Map<string, number>> {
  return parsePromText(await registry.metrics());
}

describe('notification metrics', () => {
  it('start at 0 for each event and reason', async () => {
    const registry = new Registry();
    new NotifyMetrics([registry]);
    const m = await values(registry);
    expect(m.get('stepd_notifications_sent_total{event="step.waiting"}')).toBe(0);
    expect(m.get('stepd_notifications_sent_total{event="workflow.failed"}')).toBe(0);
    expect(m.get('stepd_notifications_failed_total{event="workflow.failed",reason="http_error"}')).toBe(0);
    expect(m.get('stepd_notifications_failed_total{event="workflow.failed",reason="unreachable"}')).toBe(0);
  });

  it('count a refused delivery as failed and its retry as sent; an unreachable hook as unreachable', async () => {
    const t = await createTestSchema();
    const rx = await startReceiver(SECRET);
    const registry = new Registry();
    const metrics = new NotifyMetrics([registry]);
    // The second hook points at a port nothing listens on.
    await startNotifyStack(t, [{ on: ['workflow.failed'], url: rx.url, secret: SECRET }, { on: ['workflow.failed'], url: 'http://127.0.0.1:9/hook', secret: SECRET }], { metrics });
    rx.failNext(1);
    const id = await insertWorkflow(t, FAILS, {}, { name: 'broken' });
    await waitForWorkflow(t, id);

    const m = await waitFor(async () => {
      const v = await values(registry);
      return v.get('stepd_notifications_sent_total{event="workflow.failed"}') === 1 && (v.get('stepd_notifications_failed_total{event="workflow.failed",reason="unreachable"}') ?? 0) >= 1 ? v : undefined;
    }, 'one delivery sent after a refusal, and one unreachable', 30_000);
    expect(m.get('stepd_notifications_failed_total{event="workflow.failed",reason="http_error"}')).toBe(1);
    expect(rx.deliveries.map((d) => d.status)).toEqual([500, 204]);
  }, 60_000);
});
