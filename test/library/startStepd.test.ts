/**
 * startStepd() in this process, on a fresh schema: function tools go through the same registry,
 * permissions and limits as built-ins; zod refuses bad arguments before `run` (bad_args, no
 * retry); a cancel aborts ctx.signal; progress lands on the step row; waitForWorkflow resolves
 * from the rows (failed ones too) and gives up on its timeout; migrate: false only checks.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startStepd, WaitTimeoutError, type Stepd, type StepdOptions } from '../../src/lib/index.js';
import { silentLogger } from '../../src/logger.js';
import { createTestSchema, dropSchemaAndRoles, onCleanup, TEST_DATABASE_URL, waitFor, type TestSchema } from '../helpers/db.js';

async function start(t: TestSchema, opts: Partial<StepdOptions> = {}): Promise<Stepd> {
  const stepd = await startStepd({
    databaseUrl: t.url,
    schema: t.schema,
    migrate: false,
    logger: silentLogger(),
    pollIntervalMs: 50,
    shutdownGraceMs: 1_000,
    user: 'app',
    ...opts,
  });
  onCleanup(() => stepd.stop({ graceMs: 0 }));
  return stepd;
}

const oneStep = (tool: string, args: unknown, extra: Record<string, unknown> = {}) => ({
  start: 'only',
  steps: { only: { tool, args, done: true, ...extra } },
});

describe('startStepd', () => {
  it('runs a function tool with its context and stores its progress', async () => {
    const t = await createTestSchema();
    const seen: unknown[] = [];
    const stepd = await start(t, {
      tools: {
        'billing.charge': {
          input: z.object({ cents: z.number().int() }),
          run: async ({ cents }, ctx) => {
            seen.push({ attempt: ctx.attempt, user: ctx.user, key: ctx.idempotencyKey, workflowId: ctx.workflowId });
            ctx.progress({ progress: 1, total: 2, message: 'half' });
            return { charged: cents };
          },
        },
      },
    });
    const { workflowId } = await stepd.startWorkflow({ name: 'charge', flow: oneStep('billing.charge', { cents: '{{input.cents}}' }, { output: '{{result}}' }), input: { cents: 42 } });
    const outcome = await stepd.waitForWorkflow<{ charged: number }>(workflowId, { timeoutMs: 20_000 });
    expect(outcome.status).toBe('completed');
    if (outcome.status === 'completed') expect(outcome.output.charged).toBe(42);
    expect(seen).toEqual([{ attempt: 1, user: 'app', key: expect.stringMatching(new RegExp(`^${workflowId}:only:`)), workflowId }]);
    const [row] = await t.q<{ progress: unknown }>(`SELECT progress FROM stepd.workflow_steps WHERE workflow_id = $1`, [workflowId]);
    expect(row!.progress).toMatchObject({ progress: 1, total: 2, message: 'half' });
  });

  it('fails a step with bad_args, without calling run or retrying, when the schema refuses the arguments', async () => {
    const t = await createTestSchema();
    let calls = 0;
    const stepd = await start(t, {
      tools: { 'billing.charge': { input: z.object({ cents: z.number().int().positive() }), run: () => ++calls } },
    });
    const { workflowId } = await stepd.startWorkflow({ name: 'bad', flow: oneStep('billing.charge', { cents: 'lots' }) });
    const outcome = await stepd.waitForWorkflow(workflowId, { timeoutMs: 20_000 });
    expect(outcome.status).toBe('failed');
    if (outcome.status === 'failed') {
      expect(outcome.error.code).toBe('bad_args');
      expect(outcome.error.message).toMatch(/billing\.charge: bad arguments: cents:/);
    }
    expect(calls).toBe(0);
    expect(await t.q(`SELECT 1 FROM stepd.workflow_steps WHERE workflow_id = $1`, [workflowId])).toHaveLength(1);
  });

  it('applies the config\'s permissions to function tools', async () => {
    const t = await createTestSchema();
    let calls = 0;
    const stepd = await start(t, {
      config: { permissions: { default: ['core.*'], users: { billing: ['billing.*'] } } },
      tools: { 'billing.charge': { run: () => ++calls } },
    });
    // Refused up front for a user who may not call it; run as one who may, it completes.
    await expect(stepd.startWorkflow({ name: 'denied', flow: oneStep('billing.charge', {}) })).rejects.toMatchObject({ code: 'permission_denied' });
    const { workflowId } = await stepd.startWorkflow({ name: 'allowed', flow: oneStep('billing.charge', {}), user: 'billing' });
    expect((await stepd.waitForWorkflow(workflowId, { timeoutMs: 20_000 })).status).toBe('completed');
    expect(calls).toBe(1);
  });

  it('aborts ctx.signal when the workflow is cancelled, and waitForWorkflow says cancelled', async () => {
    const t = await createTestSchema();
    let started = false;
    let aborted: unknown;
    const stepd = await start(t, {
      tools: {
        'slow.wait': {
          run: (_args, ctx) =>
            new Promise((_resolve, reject) => {
              started = true;
              ctx.signal.addEventListener('abort', () => {
                aborted = ctx.signal.reason;
                reject(ctx.signal.reason);
              });
            }),
        },
      },
    });
    const { workflowId } = await stepd.startWorkflow({ name: 'slow', flow: oneStep('slow.wait', {}) });
    await waitFor(() => started, 'the tool to start');
    await stepd.cancelWorkflow(workflowId);
    const outcome = await stepd.waitForWorkflow(workflowId, { timeoutMs: 20_000 });
    expect(outcome.status).toBe('cancelled');
    await waitFor(() => aborted !== undefined, 'the tool\'s signal to abort');
  });

  it('sends signals and gives up waiting on its timeout (the workflow goes on)', async () => {
    const t = await createTestSchema();
    const stepd = await start(t);
    const flow = { start: 'wait', steps: { wait: { signal: { name: 'go', key: '{{input.k}}' }, done: true, output: '{{result.payload}}' } } };
    const { workflowId } = await stepd.startWorkflow({ name: 'waits', flow, input: { k: 'a' } });
    await expect(stepd.waitForWorkflow(workflowId, { timeoutMs: 300 })).rejects.toBeInstanceOf(WaitTimeoutError);
    await stepd.sendSignal({ name: 'go', key: 'a', payload: { n: 1 } });
    const outcome = await stepd.waitForWorkflow(workflowId, { timeoutMs: 20_000 });
    expect(outcome).toMatchObject({ status: 'completed', output: { n: 1 } });
  });

  it('refuses clashing prefixes and a missing database; with migrate: false, refuses a schema not migrated', async () => {
    await expect(startStepd({ databaseUrl: TEST_DATABASE_URL, logger: silentLogger(), tools: { 'core.mine': { run: () => 1 } } })).rejects.toThrow(/prefix "core" is taken/);
    await expect(startStepd({ databaseUrl: TEST_DATABASE_URL, logger: silentLogger(), tools: { nodot: { run: () => 1 } } })).rejects.toThrow(/"prefix.tool"/);
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      await expect(startStepd({ logger: silentLogger() })).rejects.toThrow(/no database/);
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
    }
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    onCleanup(async () => {
      await dropSchemaAndRoles(admin, schema);
      await admin.end();
    });
    await expect(startStepd({ databaseUrl: TEST_DATABASE_URL, schema, migrate: false, logger: silentLogger() })).rejects.toThrow(/not up to date/);
  });
});
