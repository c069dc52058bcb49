/**
 * `llm.chat` against a local server speaking the chat-completions protocol (test/helpers/chatServer.ts):
 * the request it sends, structured output checked with ajv, how each failure is classified for
 * the step's retry (429 with Retry-After, 5xx, a refused key, a timeout), usage and cost, the
 * abort of a running request, the egress policy on `baseUrl`, and the key never in an error.
 */
import { describe, expect, it } from 'vitest';
import { StepError } from '../../src/errors.js';
import { Secrets } from '../../src/secrets.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import { LlmToolProvider } from '../../src/tools/llm/llmTool.js';
import type { ToolContext } from '../../src/tools/tool.js';
import type { StepUsage } from '../../src/usage/stepUsage.js';
import { startChatServer, type ChatServer } from '../helpers/chatServer.js';
import { waitFor } from '../helpers/db.js';

const KEY = 'sk-test-0123456789abcdefSECRET';

function ctx(signal = new AbortController().signal, reported: StepUsage[] = []): ToolContext {
  return { workflowId: '1', stepId: '2', stepName: 'ask', attempt: 1, user: 'james', idempotencyKey: '1:ask:2', signal, reportUsage: (u) => reported.push(u) };
}

function provider(server: ChatServer, opts: { allow?: boolean; timeoutMs?: number } = {}): LlmToolProvider {
  const secrets = new Secrets([KEY]);
  return new LlmToolProvider({
    config: { providers: { main: { baseUrl: server.baseUrl, apiKey: KEY, prices: { 'gpt-4o-mini': { input: 0.15, output: 0.6 } }, ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}) } } },
    egress: new EgressPolicy({ policy: opts.allow === false ? {} : { allow: [`${new URL(server.baseUrl).origin}/`] } }),
    secrets,
  });
}

const ticketSchema = {
  type: 'object',
  required: ['category', 'urgent'],
  additionalProperties: false,
  properties: { category: { enum: ['billing', 'bug', 'other'] }, urgent: { type: 'boolean' } },
};

async function failure(p: Promise<unknown>): Promise<StepError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StepError);
  return err as StepError;
}

describe('llm.chat', () => {
  it('sends the chat-completions request with the key, the schema as response_format, and returns the checked answer with usage and cost', async () => {
    const server = await startChatServer({ apiKey: KEY });
    const reported: StepUsage[] = [];
    const result = await provider(server).call(
      'chat',
      { model: 'main/gpt-4o-mini', messages: [{ role: 'system', content: 'Classify.' }, { role: 'user', content: 'billing: my invoice is wrong, urgent' }], schema: ticketSchema, temperature: 0, maxTokens: 50 },
      ctx(undefined, reported),
    );
    expect(result.json).toEqual({ category: 'billing', urgent: true });
    expect(result.text).toBe('{"category":"billing","urgent":true}');
    expect(result).toMatchObject({ model: 'gpt-4o-mini-2024-07-18', finishReason: 'stop', usage: { inputTokens: 7, outputTokens: 1 } });
    const cost = (7 * 0.15 + 1 * 0.6) / 1e6;
    expect(result.usage.cost).toBeCloseTo(cost, 15);
    expect(reported).toEqual([{ model: 'main/gpt-4o-mini', inputTokens: 7, outputTokens: 1, cost: result.usage.cost }]);
    const [req] = server.requests;
    expect(req!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req!.headers['idempotency-key']).toBe('1:ask:2');
    expect(req!.body).toMatchObject({
      model: 'gpt-4o-mini',
      temperature: 0,
      max_tokens: 50,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: ticketSchema } },
    });
  });

  it('an answer that is not JSON, or breaks the schema, is a retryable invalid_output; its tokens are still reported', async () => {
    const server = await startChatServer({ apiKey: KEY });
    const p = provider(server);
    const args = { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }], schema: ticketSchema };
    server.fail({ content: 'Sure! It is billing.' }, { content: '{"category": "refund", "urgent": "yes"}' });
    const reported: StepUsage[] = [];
    const notJson = await failure(p.call('chat', args, ctx(undefined, reported)));
    expect(notJson).toMatchObject({ code: 'invalid_output', retryable: true });
    expect(notJson.message).toContain('not JSON');
    const wrong = await failure(p.call('chat', args, ctx(undefined, reported)));
    expect(wrong).toMatchObject({ code: 'invalid_output', retryable: true });
    expect(wrong.message).toContain('answer.category: must be one of ["billing","bug","other"]');
    expect(wrong.message).toContain('answer.urgent: must be boolean');
    expect(reported.map((u) => u.outputTokens)).toEqual([4, 4]);
  });

  it('429 is rate_limited with Retry-After in retryAfterMs; 5xx model_unavailable; both retryable, and the client sends each request once', async () => {
    const server = await startChatServer({ apiKey: KEY });
    const p = provider(server);
    const args = { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
    server.fail({ status: 429, retryAfter: '7' }, { status: 500 }, { status: 503 });
    const limited = await failure(p.call('chat', args, ctx()));
    expect(limited).toMatchObject({ code: 'rate_limited', retryable: true, retryAfterMs: 7000, details: { status: 429, retryAfterMs: 7000 } });
    expect(await failure(p.call('chat', args, ctx()))).toMatchObject({ code: 'model_unavailable', retryable: true, details: { status: 500 } });
    expect(await failure(p.call('chat', args, ctx()))).toMatchObject({ code: 'model_unavailable', retryable: true });
    // No retries inside the client: one request per call.
    expect(server.requests).toHaveLength(3);
  });

  it('a refused key is model_error, not retryable, and the key the server quotes back is redacted', async () => {
    const server = await startChatServer({ apiKey: 'another-key-entirely' });
    const err = await failure(provider(server).call('chat', { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, ctx()));
    expect(err).toMatchObject({ code: 'model_error', retryable: false, details: { status: 401 } });
    expect(err.message).toContain('Incorrect API key provided: [redacted]');
    expect(JSON.stringify({ m: err.message, d: err.details, s: err.stack })).not.toContain(KEY);
  });

  it('a slow answer past the provider timeout is a retryable timeout; aborting the step aborts the request on the wire', async () => {
    const server = await startChatServer({ apiKey: KEY });
    server.fail({ delayMs: 5_000 });
    const timedOut = await failure(provider(server, { timeoutMs: 200 }).call('chat', { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, ctx()));
    expect(timedOut).toMatchObject({ code: 'timeout', retryable: true });

    server.fail({ hang: true });
    const abort = new AbortController();
    const call = provider(server).call('chat', { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, ctx(abort.signal));
    await waitFor(() => server.requests.length === 2, 'the request to arrive');
    abort.abort(new StepError('cancelled', 'the workflow was cancelled'));
    expect(await failure(call)).toMatchObject({ code: 'cancelled' });
    await waitFor(() => server.requests[1]!.aborted, 'the server to see the request go away');
  });

  it('a loopback baseUrl is refused with egress_denied without an allow entry, and nothing reaches the server', async () => {
    const server = await startChatServer({ apiKey: KEY });
    const err = await failure(provider(server, { allow: false }).call('chat', { model: 'main/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, ctx()));
    expect(err).toMatchObject({ code: 'egress_denied', retryable: false, details: { reason: 'loopback' } });
    expect(server.requests).toHaveLength(0);
  });

  it('bad arguments and an unknown provider fail without a request', async () => {
    const server = await startChatServer({ apiKey: KEY });
    const p = provider(server);
    expect(await failure(p.call('chat', { model: 'gpt-4o-mini', messages: [] }, ctx()))).toMatchObject({ code: 'bad_args' });
    expect(await failure(p.call('chat', { model: 'other/x', messages: [{ role: 'user', content: 'hi' }] }, ctx()))).toMatchObject({ code: 'unknown_provider', details: { providers: ['main'] } });
    expect(await failure(p.call('chat', { model: 'main/x', messages: [{ role: 'user', content: 'hi' }], schema: { type: 'object', nonsense: 1 } }, ctx()))).toMatchObject({ code: 'bad_args' });
    expect(server.requests).toHaveLength(0);
  });
});
