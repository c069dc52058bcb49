/**
 * A workflow whose step waits for a signal, made the executor's way: a real executor admits it
 * and creates the waiting row (`tool` NULL, `pending`, `args.signal = {names, key, since}`,
 * `expires_at` the deadline). For the readers' tests (status, approve, list, MCP).
 */
import { insertWorkflow, startExecutor, waitForStep, type TestSchema } from '../helpers/db.js';

export const ORDER_FLOW = {
  start: 'await_payment',
  steps: {
    await_payment: { signal: { name: 'payment.received', key: '{{input.orderId}}', timeout: '1h' }, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: '{{input.orderId}}' }, done: true },
  },
};

/** A workflow waiting for payment.received with key order-42 (since: the workflow's creation). */
export async function waitingOrder(t: TestSchema): Promise<{ workflowId: string; stepId: string; since: string }> {
  await startExecutor(t);
  const workflowId = await insertWorkflow(t, ORDER_FLOW, { orderId: 'order-42' }, { name: 'order', user: 'shop' });
  const step = await waitForStep(t, workflowId, 'await_payment', 'pending');
  const [wf] = await t.q<{ created_at: Date }>(`SELECT created_at FROM stepd.workflows WHERE id = $1`, [workflowId]);
  return { workflowId, stepId: String(step.id), since: wf!.created_at.toISOString() };
}
