/**
 * `stepd status` (the built CLI, a real process) of a workflow whose step waits for a signal: it
 * says what for (names, key, since) and offers no approve; `stepd approve` of that step is refused
 * and the row stays pending; `stepd list` does not count it as a gate waiting for approval.
 * (The waiting row is made by a real executor: signalWaitRow.ts.)
 */
import { describe, expect, it } from 'vitest';
import { createTestSchema } from '../helpers/db.js';
import { envFor, runCli } from './helpers.js';
import { waitingOrder } from './signalWaitRow.js';

describe('stepd status of a step waiting for a signal', () => {
  it('shows "waits for signal payment.received (key order-42) since …" and offers no approve', async () => {
    const t = await createTestSchema();
    const { workflowId, stepId, since } = await waitingOrder(t);

    const text = await runCli(['status', workflowId], { env: envFor(t) });
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`await_payment.*#${stepId} {2}waits for signal payment\\.received \\(key order-42\\) since \\d\\d:\\d\\d:\\d\\d \\(.+ ago\\), expires in .+ → stepd signal payment\\.received --key order-42`));
    expect(text.stdout).toMatch(new RegExp(`^waiting: step ${stepId} \\(await_payment\\) waits for signal payment\\.received \\(key order-42\\) since .* — send it: stepd signal payment\\.received --key order-42`, 'm'));
    expect(text.stdout).not.toContain('stepd approve');

    const json = await runCli(['status', workflowId, '--json'], { env: envFor(t) });
    const view = JSON.parse(json.stdout) as { waiting: unknown[]; signals: unknown[]; steps: { id: string; approve?: string }[] };
    expect(view.waiting).toEqual([]);
    expect(view.signals).toEqual([{ stepId, name: 'await_payment', names: ['payment.received'], key: 'order-42', since, expiresAt: expect.any(String), send: 'stepd signal payment.received --key order-42' }]);
    expect(view.steps.find((s) => s.id === stepId)?.approve).toBeUndefined();
  });

  it('stepd approve (and --reject) of it is refused, saying what it waits for, and the row stays pending; stepd list counts no gate', async () => {
    const t = await createTestSchema();
    const { workflowId, stepId } = await waitingOrder(t);
    for (const args of [['approve', stepId, '--by', 'james'], ['approve', stepId, '--reject', '--by', 'james']]) {
      const r = await runCli(args, { env: envFor(t) });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain(`step ${stepId} (await_payment) is not a gate: it waits for signal payment.received (key order-42) and goes on when one is sent (stepd signal payment.received --key order-42)`);
    }
    expect(await t.q(`SELECT status, readied_by FROM stepd.workflow_steps WHERE id = $1`, [stepId])).toEqual([{ status: 'pending', readied_by: null }]);
    const list = await runCli(['list', '--json'], { env: envFor(t) });
    expect(list.code).toBe(0);
    const workflows = JSON.parse(list.stdout) as { id: string; waiting: number }[];
    expect(workflows.find((w) => w.id === workflowId)?.waiting).toBe(0);
  });
});
