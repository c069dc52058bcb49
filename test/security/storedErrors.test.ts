/**
 * Stored error text is cut to the documented size (src/storedError.ts): 1 kB of UTF-8 per
 * message, cut on a code point, with a marker. A client role's flow whose tool fails with 9,000
 * characters used to store all of them on the step and the workflow; so could a gate's rejection
 * reason, which the readier chooses. Secrets are redacted before the cut, so a secret the cut
 * would halve leaks no prefix.
 */
import { describe, expect, it } from 'vitest';
import { Secrets } from '../../src/secrets.js';
import { cutErrorText, STORED_ERROR_BYTES } from '../../src/storedError.js';
import type { ToolContext, ToolInfo, ToolProvider } from '../../src/tools/tool.js';
import { assertServing, clientInsert, failedStepError, securityEnv, waitForStep, waitForWorkflow, type TestSchema } from './helpers.js';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** `loud.fail` throws a plain Error with the message it is given (as any tool's bug could). */
class LoudTools implements ToolProvider {
  readonly prefix = 'loud';
  async call(_tool: string, args: unknown, _ctx: ToolContext): Promise<unknown> {
    throw new Error(String((args as { message?: unknown }).message));
  }
  async list(): Promise<ToolInfo[]> {
    return [{ name: 'fail' }];
  }
}

const failing = (tool: string, message: string) => ({ start: 'a', steps: { a: { tool, args: { message }, retry: { maxAttempts: 1 }, done: true } } });

/** The stored messages of the workflow and its failed step, with their sizes as PostgreSQL counts them. */
async function storedMessages(t: TestSchema, id: string): Promise<{ message: string; bytes: number }[]> {
  return t.q(
    `SELECT error->>'message' AS message, octet_length(error->>'message') AS bytes FROM stepd.workflows WHERE id = $1
     UNION ALL SELECT error->>'message', octet_length(error->>'message') FROM stepd.workflow_steps WHERE workflow_id = $1 AND status = 'failed'`,
    [id],
  );
}

function expectCut(stored: { message: string; bytes: number }[], kept: string): void {
  expect(stored.length).toBeGreaterThanOrEqual(2);
  for (const { message, bytes } of stored) {
    expect(bytes).toBeLessThanOrEqual(STORED_ERROR_BYTES);
    expect(message).not.toMatch(LONE_SURROGATE);
    expect(message).toContain(kept);
    expect(message).toMatch(/… \(cut: \d+ characters in all\)$/);
  }
}

describe('stored error text is cut to 1 kB', () => {
  it("a client's tool error of 9,000 characters is stored at most 1 kB on the step and the workflow; with 4-byte emoji at the cut, no half of one", async () => {
    const env = await securityEnv({ providers: [new LoudTools()] });
    const plain = await clientInsert(env.client, failing('core.fail', `begin ${'x'.repeat(9_000)}`));
    expect((await waitForWorkflow(env.t, plain)).status).toBe('failed');
    expectCut(await storedMessages(env.t, plain), 'begin xxx');

    // Emoji (4 bytes, two UTF-16 units) across every possible cut position.
    for (const pad of [0, 1, 2, 3]) {
      const id = await clientInsert(env.client, failing('loud.fail', `${'y'.repeat(pad)}${'🙂'.repeat(2_500)}`));
      expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
      const stored = await storedMessages(env.t, id);
      expectCut(stored, '🙂🙂');
      for (const { message } of stored) expect(message.replace(/… \(cut.*$/, '')).toMatch(/^(?:y*)(?:🙂)+$/);
    }
    await env.bystander.assertUndisturbedAndServed();
    await assertServing(env.t);
  });

  it('a gate rejection reason of 9,000 characters, chosen by the client that readies it, is cut too', async () => {
    const env = await securityEnv();
    const id = await clientInsert(env.client, { start: 'review', steps: { review: { approval: true, done: true } } });
    const gate = await waitForStep(env.t, id, 'review', 'pending');
    await env.client.q(`UPDATE stepd.workflow_steps SET status = 'ready', result = $2 WHERE id = $1`, [gate.id, JSON.stringify({ approved: false, reason: 'é'.repeat(9_000) })]);
    expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
    const error = await failedStepError(env.t, id);
    expect(error.code).toBe('rejected');
    expectCut(await storedMessages(env.t, id), 'rejected: éé');
    await env.bystander.assertUndisturbedAndServed();
  });

  it('redacts a secret before cutting, so a secret the cut would halve leaks no prefix', async () => {
    const secret = 'sk-live-0123456789abcdefghijklmnop';
    const secrets = new Secrets([secret]);
    const env = await securityEnv({ providers: [new LoudTools()], secrets });
    // Without redaction, the cut (about 990 bytes in) would keep "sk-live-0123…" and drop the rest.
    const text = `${'z'.repeat(975)}${secret}${'z'.repeat(8_000)}`;
    const id = await clientInsert(env.client, failing('loud.fail', text));
    expect((await waitForWorkflow(env.t, id)).status).toBe('failed');
    for (const { message, bytes } of await storedMessages(env.t, id)) {
      expect(bytes).toBeLessThanOrEqual(STORED_ERROR_BYTES);
      expect(message).not.toContain('sk-live');
      expect(message).toContain('[redacted]');
    }
    // The same text not redacted first would have kept the prefix: the order matters.
    expect(cutErrorText(text)).toContain('sk-live');
  });
});
