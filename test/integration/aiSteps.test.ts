/**
 * `llm.chat` through the whole executor against a local chat-completions server: usage and cost
 * on every step row and summed on the workflow rows (a forEach, a sub-workflow rolled into its
 * parent), retries as the step's (429 after Retry-After, 5xx, an answer that breaks the schema),
 * a cancelled workflow aborting its request, cost budgets (the flow's, the user's) stopping a
 * loop before its next call, and the API key in no row, event or log line.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { PromMetrics } from '../../src/telemetry/promMetrics.js';
import { Secrets } from '../../src/secrets.js';
import { EgressPolicy } from '../../src/tools/egress.js';
import type { LlmConfig } from '../../src/tools/llm/llmConfig.js';
import { LlmToolProvider } from '../../src/tools/llm/llmTool.js';
import { startChatServer, type ChatServer } from '../helpers/chatServer.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForStep, waitForWorkflow, type TestSchema, type TestExecutorOptions } from '../helpers/db.js';

const KEY = 'sk-integration-9876543210zyxwvu';
const FAST_RETRY = { maxAttempts: 3, initial: '20ms', jitter: false };

function llmConfig(server: ChatServer, extra: Partial<LlmConfig> = {}): LlmConfig {
  // 1 per million input tokens, 100,000 per million output tokens: an answer of one word costs 0.1 plus the prompt.
  return { providers: { main: { baseUrl: server.baseUrl, apiKey: KEY, prices: { small: { input: 0, output: 100_000 } } } }, ...extra };
}

async function start(t: TestSchema, server: ChatServer, opts: TestExecutorOptions & { llm?: LlmConfig } = {}): Promise<void> {
  const llm = opts.llm ?? llmConfig(server);
  const secrets = new Secrets([KEY]);
  const tool = new LlmToolProvider({ config: llm, secrets, egress: new EgressPolicy({ policy: { allow: [`${new URL(server.baseUrl).origin}/`] } }) });
  await startExecutor(t, { ...opts, llm, tools: [tool] });
}

const classify = (text: string) => ({
  tool: 'llm.chat',
  args: {
    model: 'main/small',
    messages: [{ role: 'user', content: text }],
    schema: { type: 'object', required: ['category'], properties: { category: { enum: ['billing', 'bug', 'other'] } } },
  },
  retry: FAST_RETRY,
});

describe('llm.chat steps in workflows', () => {
  it('records usage on each step and sums it on the workflow rows, across a forEach and a sub-workflow', async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    server.answer = () => 'ok';
    const metrics = new PromMetrics({ processMetrics: false });
    await t.q(`INSERT INTO stepd.flows (name, flow) VALUES ('summarize', $1)`, [
      JSON.stringify({ start: 'sum', steps: { sum: { tool: 'llm.chat', args: { model: 'main/small', messages: [{ role: 'user', content: 'summarize {{input.n}} tickets' }] }, done: true, output: '{{result.text}}' } } }),
    ]);
    await start(t, server, { metrics });
    const id = await insertWorkflow(t, {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.tickets}}', step: 'one', concurrency: 2 }, join: 'summary' },
        one: { tool: 'llm.chat', args: { model: 'main/small', messages: [{ role: 'user', content: '{{item}}' }] } },
        summary: { workflow: { name: 'summarize', input: { n: 3 } }, done: true, output: '{{result}}' },
      },
    }, { tickets: ['refund please', 'app crashes on start', 'hello'] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toBeNull();
    expect(wf.status).toBe('completed');

    const steps = await getSteps(t, id);
    const ones = steps.filter((s) => s.name === 'one');
    expect(ones.map((s) => s.usage)).toEqual([
      { model: 'main/small', inputTokens: 2, outputTokens: 1, cost: 0.1 },
      { model: 'main/small', inputTokens: 4, outputTokens: 1, cost: 0.1 },
      { model: 'main/small', inputTokens: 1, outputTokens: 1, cost: 0.1 },
    ]);
    const [child] = await t.q(`SELECT id, usage FROM stepd.workflows WHERE parent_id = $1`, [id]);
    expect(child.usage).toEqual({ inputTokens: 3, outputTokens: 1, cost: 0.1 });
    const summary = steps.find((s) => s.name === 'summary' && s.status === 'done') !;
    expect(summary.usage).toEqual({ inputTokens: 3, outputTokens: 1, cost: 0.1 });
    // Gates, forks and echo steps have none; the parent's sum holds its steps and its child.
    expect(steps.filter((s) => s.name === 'each').map((s) => s.usage)).toEqual([null]);
    expect(wf.usage).toEqual({ inputTokens: 10, outputTokens: 4, cost: 0.4 });
    // /metrics counted each call once (the sub-workflow step itself reported nothing).
    const text = await metrics.render();
    expect(text).toContain('stepd_usage_tokens_total{model="main/small",user="none",direction="input"} 10');
    expect(text).toContain('stepd_usage_tokens_total{model="main/small",user="none",direction="output"} 4');
    expect(text).toMatch(/stepd_usage_cost_total\{model="main\/small",user="none"\} 0\.4/);
  });

  it('retries 429 after its Retry-After, then 500, then an answer that breaks the schema, and completes; every answered attempt keeps its usage', async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    await start(t, server);
    server.fail({ status: 429, retryAfter: '1' });
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: { ...classify('my bill is wrong: billing'), retry: { maxAttempts: 4, initial: '20ms', jitter: false }, done: true, output: '{{result.json.category}}' } } });
    await waitForStep(t, id, 'ask', 'failed');
    server.fail({ status: 500 }, { content: '{"category": "refund"}' });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: 'billing' });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.attempt, s.status, (s.error as { code?: string } | null)?.code ?? null])).toEqual([
      [1, 'failed', 'rate_limited'],
      [2, 'failed', 'model_unavailable'],
      [3, 'failed', 'invalid_output'],
      [4, 'done', null],
    ]);
    // The second attempt waited for Retry-After (1 s), not the 20 ms backoff.
    const waited = new Date(steps[1]!.ready_at!).getTime() - new Date(steps[0]!.completed_at!).getTime();
    expect(waited).toBeGreaterThanOrEqual(950);
    const usages = steps.map((s) => s.usage ?? null);
    expect(usages[0]).toBeNull();
    expect(usages[1]).toBeNull();
    expect(usages[2]).toMatchObject({ model: 'main/small', outputTokens: 2 });
    expect(usages[3]).toMatchObject({ model: 'main/small', outputTokens: 1 });
    expect(wf.usage).toMatchObject({ outputTokens: 3 });
    expect(server.requests).toHaveLength(4);
  });

  it("a slow answer past the step's timeout is aborted and retried", async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    await start(t, server);
    server.fail({ delayMs: 10_000 });
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: { ...classify('a bug: it crashes'), timeout: '500ms', done: true, output: '{{result.json}}' } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf).toMatchObject({ status: 'completed', output: { category: 'bug' } });
    const steps = await getSteps(t, id);
    expect(steps.map((s) => [s.attempt, s.status, s.error?.code ?? null])).toEqual([
      [1, 'failed', 'timeout'],
      [2, 'done', null],
    ]);
    expect(server.requests[0]!.aborted).toBe(true);
  });

  it('cancelling the workflow aborts the running request', async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    await start(t, server);
    server.fail({ hang: true });
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: classify('slow one') } });
    await waitFor(() => server.requests.length === 1, 'the request to arrive');
    await t.q(`UPDATE stepd.workflows SET status = 'cancelled' WHERE id = $1`, [id]);
    await waitFor(() => server.requests[0]!.aborted, 'the server to see the request go away');
    expect((await waitForWorkflow(t, id)).status).toBe('cancelled');
    expect(server.requests).toHaveLength(1);
  });

  it("a flow's budget stops a loop before its next call: the workflow fails with budget_exceeded", async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    server.answer = () => 'ok';
    await start(t, server);
    const id = await insertWorkflow(t, {
      start: 'each',
      budget: { cost: 0.25 },
      steps: {
        each: { forEach: { items: '{{input.items}}', step: 'one', concurrency: 1 }, join: 'end' },
        one: { tool: 'llm.chat', args: { model: 'main/small', messages: [{ role: 'user', content: 'x' }] } },
        end: { tool: 'core.echo', args: {}, done: true },
      },
    }, { items: [1, 2, 3, 4, 5, 6] });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'budget_exceeded', step: 'one' });
    expect((wf.error as { message: string }).message).toContain("reaching its flow's budget.cost (0.25)");
    // 0.1 per call: the fourth call would start at 0.3, past 0.25.
    expect(server.requests).toHaveLength(3);
    expect(wf.usage).toMatchObject({ cost: 0.3 });
  });

  it("the config's per-user budget applies too, and the step's onError may route budget_exceeded", async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    server.answer = () => 'ok';
    await start(t, server, { llm: llmConfig(server, { budgets: { default: 100, users: { james: 0.15 } } }) });
    const flow = {
      start: 'each',
      steps: {
        each: { forEach: { items: '{{input.items}}', step: 'one', concurrency: 1 }, join: 'end' },
        one: { tool: 'llm.chat', args: { model: 'main/small', messages: [{ role: 'user', content: 'x' }] }, onError: 'skipped' },
        skipped: { tool: 'core.echo', args: { skipped: '{{error.code}}' } },
        end: { tool: 'core.echo', args: { results: '{{results}}' }, done: true, output: '{{result.results}}' },
      },
    };
    const id = await insertWorkflow(t, flow, { items: [1, 2, 3, 4] }, { user: 'james' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(server.requests).toHaveLength(2);
    expect((wf.output as unknown[]).slice(2)).toEqual([{ skipped: 'budget_exceeded' }, { skipped: 'budget_exceeded' }]);
    // Another user is held to the default only.
    const other = await insertWorkflow(t, flow, { items: [1, 2, 3] }, { user: 'ann' });
    expect((await waitForWorkflow(t, other)).status).toBe('completed');
    expect(server.requests).toHaveLength(5);
  });

  it('the API key appears in no row, event or log line, also when the server quotes it back in an error', async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: 'the-server-wants-another-key' });
    const lines: string[] = [];
    const secrets = new Secrets([KEY]);
    const log = createLogger({ level: 'debug', secrets, destination: new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }) as never });
    const events: string[] = [];
    const listener = new pg.Client({ connectionString: t.url });
    await listener.connect();
    onCleanup(() => listener.end());
    listener.on('notification', (n) => events.push(n.payload ?? ''));
    await listener.query('LISTEN stepd_events');
    await start(t, server, { log, emitEvents: true });
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: { ...classify('hi'), retry: { maxAttempts: 1 } } } });
    const wf = await waitForWorkflow(t, id);
    expect(wf.error).toMatchObject({ code: 'model_error' });
    expect(JSON.stringify(wf.error)).toContain('Incorrect API key provided: [redacted]');
    await waitFor(() => events.some((e) => e.includes('workflow.failed')), 'the workflow.failed event');
    const rows = JSON.stringify([await t.q(`SELECT * FROM stepd.workflows`), await t.q(`SELECT * FROM stepd.workflow_steps`)]);
    expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(rows).not.toContain(KEY);
    expect(events.join('\n')).not.toContain(KEY);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain(KEY);
  });
});
