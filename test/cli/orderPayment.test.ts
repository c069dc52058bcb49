/**
 * docs/signals.md's worked example, as written: examples/order-payment.json run with --follow by
 * the built CLI against a real executor, its wait shown by `run --follow` (the `step.waiting`
 * event carries what it waits for) and `stepd status`, then paid with `stepd signal`. Another
 * order is cancelled by a signal, which does not wake the first one's wait (another key).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestSchema, startExecutor, waitFor, waitForStep, waitForWorkflow } from '../helpers/db.js';
import { listenFor } from '../helpers/listen.js';
import { EXAMPLES, envFor, jsonLines, runCli, spawnCli } from './helpers.js';

const FLOW = path.join(EXAMPLES, 'order-payment.json');

describe('docs/signals.md: an order that waits for its payment', () => {
  it('run --follow shows the wait with its names, key and since; stepd signal pays it and the order ships', async () => {
    const t = await createTestSchema();
    // The events as the executor sends them, before any reader confirms them.
    const sent = await listenFor(t, 'stepd_events');
    await startExecutor(t);
    const env = envFor(t);

    const json = spawnCli(['run', FLOW, '--input', '{"orderId": "order-42"}', '--follow', '--json'], { env });
    const [line] = await json.waitFor(/^\{"type":"step\.waiting".*$/m);
    const waiting = JSON.parse(line) as { stepId: string; step: string; signal: { names: string[]; key: string | null; since: string } };
    expect(waiting).toMatchObject({ step: 'await_payment', signal: { names: ['payment.received', 'order.cancelled'], key: 'order-42' } });
    const workflowId = jsonLines(json.stdout)[0]!.id as string;
    const [wf] = await t.q<{ created_at: Date }>(`SELECT created_at FROM stepd.workflows WHERE id = $1`, [workflowId]);
    expect(new Date(waiting.signal.since).getTime()).toBe(wf!.created_at.getTime());
    // The step.waiting event itself carries what the step waits for.
    const raw = await waitFor(() => sent.find((e) => e.type === 'step.waiting' && e.stepId === waiting.stepId), 'the step.waiting event');
    expect(raw.signal).toEqual({ names: ['payment.received', 'order.cancelled'], key: 'order-42', since: expect.any(String) });
    expect(new Date(raw.signal.since).getTime()).toBe(wf!.created_at.getTime());

    // A second order, followed as text: its wait is shown in words; its cancellation does not wake order-42.
    const text = spawnCli(['run', FLOW, '--input', '{"orderId": "order-43"}', '--follow'], { env });
    await text.waitFor(/await_payment #\d+ waits for signal payment\.received or order\.cancelled \(key order-43\) since \d\d:\d\d:\d\d .*→ stepd signal payment\.received --key order-43/);
    expect(text.stdout).not.toContain('stepd approve');
    expect((await runCli(['signal', 'order.cancelled', '--key', 'order-43'], { env })).code).toBe(0);
    expect((await text.exited).code).toBe(0);
    expect(JSON.parse(/^output: (.*)$/m.exec(text.stdout)![1]!)).toEqual({ released: 'order-43', because: 'order.cancelled' });

    const status = await runCli(['status', workflowId], { env });
    expect(status.stdout).toMatch(new RegExp(`await_payment \\(signal\\)  #${waiting.stepId}  waits for signal payment\\.received or order\\.cancelled \\(key order-42\\) since \\d\\d:\\d\\d:\\d\\d \\(.+ ago\\), expires in 4m\\d\\ds → stepd signal payment\\.received --key order-42`));
    expect(status.stdout).not.toContain('stepd approve');
    await waitForStep(t, workflowId, 'await_payment', 'pending');

    const paid = await runCli(['signal', 'payment.received', '--key', 'order-42', '--payload', '{"amount": 1200}'], { env });
    expect(paid.code).toBe(0);
    const done = await json.exited;
    expect(done.code).toBe(0);
    const end = jsonLines(done.stdout).at(-1)!;
    expect(end).toMatchObject({ type: 'workflow.completed', output: { shipped: 'order-42', amount: 1200, paidBy: 'postgres' } });
    expect((await waitForWorkflow(t, workflowId)).status).toBe('completed');
    const after = await runCli(['status', workflowId], { env });
    expect(after.stdout).toMatch(new RegExp(`await_payment \\(signal\\)  #${waiting.stepId}  done after waiting .+ for signal payment\\.received or order\\.cancelled \\(key order-42\\): got payment\\.received #${paid.stdout.trim()} from role postgres`));
  });
});
