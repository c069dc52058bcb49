/**
 * /metrics of `stepd start --http 0` passes `promtool check metrics` (Debian's prometheus package:
 * /usr/bin/promtool), and carries the gate gauges (gates waiting, the oldest one's age) and the
 * workflow duration histogram by flow and status. A forged end event (any role may NOTIFY) for a
 * workflow that has not ended is not observed. Built CLI, real socket, real database.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envFor, spawnCli } from '../cli/helpers.js';
import { createTestSchema, insertWorkflow, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { parsePromText } from './promText.js';

const READY = /metrics at (http:\/\/\S+)\/metrics/;
const PROMTOOL = ['/usr/bin/promtool', ...(process.env.PATH ?? '').split(':').map((d) => `${d}/promtool`)].find((p) => existsSync(p));

async function scrapeText(base: string): Promise<string> {
  const res = await fetch(`${base}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

describe('/metrics, checked by promtool', () => {
  it('has no gauge named *_total, and reports waiting gates and workflow durations', { timeout: 60_000 }, async (ctx) => {
    const t = await createTestSchema();
    const daemon = spawnCli(['start', '--http', '0', '--poll-interval', '100ms'], { env: envFor(t) });
    const base = (await daemon.waitFor(READY))[1]!;

    const gated = await insertWorkflow(t, { start: 'review', steps: { review: { approval: true, next: 'ship' }, ship: { tool: 'core.echo', args: {} } } }, {}, { name: 'release' });
    const quick = await insertWorkflow(t, { start: 'a', steps: { a: { tool: 'core.echo', args: {} } } }, {}, { name: 'quick' });
    await waitForStep(t, gated, 'review', 'pending');
    await waitForWorkflow(t, quick, ['completed']);
    // A forged end of the gated (still running) workflow: a hint the rows do not confirm.
    await t.q(`SELECT pg_notify('stepd_events', $1)`, [JSON.stringify({ type: 'workflow.completed', schema: t.schema, workflowId: gated, at: new Date().toISOString() })]);

    const text = await waitFor(async () => {
      const body = await scrapeText(base);
      return parsePromText(body).get('stepd_workflow_duration_seconds_count{flow="quick",status="completed"}') === 1 ? body : undefined;
    }, 'the duration of the quick workflow');
    const m = parsePromText(text);
    expect(m.get('stepd_gates_waiting')).toBe(1);
    expect(m.get('stepd_oldest_gate_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(m.get('stepd_notifications_failed_total{event="step.waiting",reason="http_error"}')).toBe(0);
    expect(m.get('stepd_workflow_duration_seconds_bucket{le="+Inf",flow="quick",status="completed"}')).toBe(1);
    expect([...m.keys()].filter((k) => k.includes('flow="release"'))).toEqual([]);
    expect(text).not.toMatch(/^# TYPE \S+_total (gauge|histogram|summary|untyped)$/m);

    if (!PROMTOOL) return ctx.skip('promtool is not installed (Debian: apt-get install prometheus)');
    const checked = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect({ status: checked.status, out: checked.stdout + checked.stderr }).toEqual({ status: 0, out: '' });

    const { code } = await daemon.kill('SIGTERM');
    expect(code).toBe(0);
  });
});
