/**
 * docs/ai-steps.md's worked example, as written: examples/ai-steps/support-ticket.json with
 * examples/ai-steps/stepd.config.json (LLM_BASE_URL and OPENAI_API_KEY from the environment) run
 * by the built CLI — validate, start, run --follow, approve, status — against a local server
 * that speaks the chat-completions protocol. The follow ends with the cost, status shows it on
 * the workflow and each model step, and the key is in no output or log line.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startChatServer } from '../helpers/chatServer.js';
import { createTestSchema, waitForWorkflow } from '../helpers/db.js';
import { EXAMPLES, envFor, runCli, spawnCli } from './helpers.js';

const FLOW = path.join(EXAMPLES, 'ai-steps', 'support-ticket.json');
const CONFIG = path.join(EXAMPLES, 'ai-steps', 'stepd.config.json');
const KEY = 'sk-doc-example-5f4e3d2c1b0a';

describe('docs/ai-steps.md: triage a support ticket', () => {
  it('classifies, drafts, waits for approval, completes, and shows what it cost', async () => {
    const t = await createTestSchema();
    const server = await startChatServer({ apiKey: KEY });
    const env = { ...envFor(t), LLM_BASE_URL: server.baseUrl, OPENAI_API_KEY: KEY };

    const valid = await runCli(['validate', FLOW, '--config', CONFIG], { env });
    expect(valid.stdout).toContain('support-ticket.json: valid (5 steps)');
    expect(valid.code).toBe(0);

    const daemon = spawnCli(['start', '--config', CONFIG, '--poll-interval', '50ms'], { env: { ...env, STEPD_LOG_LEVEL: 'info' } });
    await daemon.waitFor(/executor started/, 'stderr');

    const run = spawnCli(['run', FLOW, '--follow', '--input', '{"ticket": "I was charged twice for my invoice this month, please refund one."}'], { env });
    const [, gateId] = await run.waitFor(/review #\d+ waiting for approval: Send this reply to the billing ticket\? Thank you for your message\..* → stepd approve (\d+)/);
    const workflowId = /workflow (\d+) started/.exec(run.stdout)![1]!;

    expect((await runCli(['approve', gateId!], { env })).code).toBe(0);
    const done = await run.exited;
    expect(done.code).toBe(0);
    expect(JSON.parse(/^output: (.*)$/m.exec(done.stdout)![1]!)).toEqual({ category: 'billing', urgent: false, reply: expect.stringMatching(/^Thank you for your message\. /) });
    const usage = /^usage: (\d+) in \/ (\d+) out tokens, cost (\S+)$/m.exec(done.stdout);
    expect(usage, done.stdout).not.toBeNull();

    const wf = await waitForWorkflow(t, workflowId);
    expect(wf.usage).toEqual({ inputTokens: Number(usage![1]), outputTokens: Number(usage![2]), cost: expect.any(Number) });
    expect(wf.usage!.cost).toBeCloseTo((wf.usage!.inputTokens * 0.15 + wf.usage!.outputTokens * 0.6) / 1e6, 12);
    expect(server.requests.map((r) => r.body.response_format?.type ?? 'text')).toEqual(['json_schema', 'text']);

    const status = await runCli(['status', workflowId], { env });
    expect(status.stdout).toContain(`  usage: ${usage![1]} in / ${usage![2]} out tokens, cost ${usage![3]}`);
    expect(status.stdout).toMatch(/classify \(llm\.chat\)  #\d+  done .*\[\d+ in \/ 1 out tokens, cost \S+\]/);
    expect(status.stdout).toMatch(/draft \(llm\.chat\)  #\d+  done .*\[\d+ in \/ \d+ out tokens, cost \S+\]/);

    // A ticket no category fits goes to a person: no draft, no gate.
    const other = await runCli(['run', FLOW, '--follow', '--input', '{"ticket": "Hello, who are you?"}'], { env });
    expect(other.code).toBe(0);
    expect(other.stdout).toContain('"note":"no category fits: a person takes this one"');

    await daemon.kill('SIGTERM');
    for (const text of [valid.stdout, valid.stderr, done.stdout, done.stderr, status.stdout, daemon.stdout, daemon.stderr]) expect(text).not.toContain(KEY);
  });
});
