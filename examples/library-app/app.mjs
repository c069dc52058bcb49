// stepd as a library: the executor runs in this process, `billing.charge` and `mail.receipt`
// are plain functions, and the workflow waits for a signal this app sends itself.
//   DATABASE_URL=postgres://localhost/app node app.mjs
import { startStepd } from 'stepd';
import { z } from 'zod';

const stepd = await startStepd({
  databaseUrl: process.env.DATABASE_URL,
  schema: process.env.STEPD_SCHEMA, // default "stepd"
  tools: {
    'billing.charge': {
      input: z.object({ orderId: z.string().min(1), cents: z.number().int().positive() }),
      run: async ({ orderId, cents }, ctx) => {
        ctx.progress({ progress: 1, total: 1, message: 'charged' });
        // ctx.idempotencyKey is the same on every attempt of this step: a payment API dedupes on it.
        return { chargeId: `ch_${orderId}`, cents, idempotencyKey: ctx.idempotencyKey, pid: process.pid };
      },
    },
    'mail.receipt': {
      input: z.object({ to: z.string(), chargeId: z.string() }),
      run: async ({ to, chargeId }, ctx) => {
        if (ctx.signal.aborted) throw new Error('cancelled');
        return { sent: `receipt for ${chargeId} to ${to}` };
      },
    },
  },
});

const flow = {
  start: 'charge',
  steps: {
    charge: { tool: 'billing.charge', args: { orderId: '{{input.orderId}}', cents: '{{input.cents}}' }, next: 'shipped' },
    shipped: { signal: { name: 'order.shipped', key: '{{input.orderId}}', since: 'workflow', timeout: '1m' }, next: 'receipt' },
    receipt: {
      tool: 'mail.receipt',
      args: { to: '{{input.email}}', chargeId: '{{steps.charge.result.chargeId}}' },
      done: true,
      output: { charge: '{{steps.charge.result}}', receipt: '{{result.sent}}', carrier: '{{steps.shipped.result.payload.carrier}}' },
    },
  },
};

try {
  const orderId = `order-${process.pid}-${Date.now()}`;
  const { workflowId } = await stepd.startWorkflow({ name: 'checkout', flow, input: { orderId, cents: 1200, email: 'ada@example.com' } });
  await stepd.sendSignal({ name: 'order.shipped', key: orderId, payload: { carrier: 'post' } });
  const outcome = await stepd.waitForWorkflow(workflowId, { timeoutMs: 60_000 });
  console.log(JSON.stringify(outcome));
  process.exitCode = outcome.status === 'completed' ? 0 : 1;
} finally {
  await stepd.stop();
}
