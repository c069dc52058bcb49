/** Readied signal waits to test the pickup and the outcome lane with, made by a real executor and a real signal. */
import { insertWorkflow, startExecutor, waitFor, type TestSchema } from './db.js';

/** A wait for the signal `payment` keyed by the order, then an echo. */
export const PAID = {
  start: 'paid',
  steps: {
    paid: { signal: { name: 'payment', key: '{{input.order}}' }, next: 'ship' },
    ship: { tool: 'core.echo', args: {}, done: true },
  },
};

/** `count` workflows (orders o-0, o-1, …) whose waits are readied, with no executor running. */
export async function readiedWaits(t: TestSchema, count: number): Promise<void> {
  const executor = await startExecutor(t);
  for (let i = 0; i < count; i++) await insertWorkflow(t, PAID, { order: `o-${i}` });
  await waitFor(async () => {
    const [r] = await t.q<{ n: number }>(`SELECT count(*)::int AS n FROM stepd.workflow_steps WHERE name = 'paid' AND status = 'pending'`);
    return r!.n === count;
  }, 'the waits to be pending');
  await executor.stop({ graceMs: 0 });
  await t.q(`INSERT INTO stepd.signals (name, key, payload) SELECT 'payment', 'o-' || n, '{}' FROM generate_series(0, $1::int - 1) AS n`, [count]);
}
