/**
 * A workflow whose step waits for a signal, its row written as the executor writes it (`tool`
 * NULL, `pending`, `args.signal = {names, key, since}`, `expires_at` the deadline), with the
 * executor marker: for the readers' tests (status, approve, MCP), without a daemon.
 */
import { asExecutor, insertWorkflow, type TestSchema } from '../helpers/db.js';

export const ORDER_FLOW = {
  start: 'await_payment',
  steps: {
    await_payment: { signal: { name: 'payment.received', key: '{{input.orderId}}', timeout: '1h' }, next: 'ship' },
    ship: { tool: 'core.echo', args: { shipped: '{{input.orderId}}' }, done: true },
  },
};

/** A workflow waiting for payment.received with key order-42, as the executor leaves it. */
export async function waitingOrder(t: TestSchema): Promise<{ workflowId: string; stepId: string; since: string }> {
  const workflowId = await insertWorkflow(t, ORDER_FLOW, { orderId: 'order-42' }, { name: 'order', user: 'shop' });
  const [wf] = await t.q<{ created_at: Date }>(`SELECT created_at FROM stepd.workflows WHERE id = $1`, [workflowId]);
  const since = wf!.created_at.toISOString();
  const [step] = await asExecutor<{ id: string }>(
    t,
    `INSERT INTO stepd.workflow_steps (workflow_id, name, tool, args, status, expires_at)
     VALUES ($1, 'await_payment', NULL, $2::jsonb, 'pending', now() + interval '1 hour') RETURNING id::text`,
    [workflowId, JSON.stringify({ signal: { names: ['payment.received'], key: 'order-42', since } })],
  );
  return { workflowId, stepId: step!.id, since };
}
