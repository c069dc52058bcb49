/**
 * Usage reported by other tools is recorded the same way as llm.chat's: an MCP tool's
 * `_meta.usage` (also on an isError result), and the `usage` of a tool's result (what a worker
 * or an in-process tool returns), each on the step row and summed on the workflow's.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { createMcpProviders } from '../../src/tools/mcp/index.js';
import type { ToolInfo, ToolProvider } from '../../src/tools/tool.js';
import { startHttpMcpServer } from '../mcp-servers/http-server.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitForWorkflow } from '../helpers/db.js';

/** `own.answer` returns a result with a `usage`, as a worker's function would. */
class OwnTools implements ToolProvider {
  readonly prefix = 'own';
  async call(): Promise<unknown> {
    return { answer: 42, usage: { model: 'local/llama', input_tokens: 10, output_tokens: 5, cost: 0.01 } };
  }
  async list(): Promise<ToolInfo[]> {
    return [{ name: 'answer' }];
  }
}

describe('usage from MCP tools and tool results', () => {
  it("records an MCP tool's _meta.usage (done and isError) and a result's usage on the rows", async () => {
    const t = await createTestSchema();
    const web = await startHttpMcpServer();
    onCleanup(() => web.close());
    const providers = createMcpProviders({ web: { url: web.url } }, { log: silentLogger(), idleMs: 60_000 });
    onCleanup(async () => void (await Promise.all(providers.map((p) => p.close()))));
    await startExecutor(t, { tools: [...providers, new OwnTools()] });
    const id = await insertWorkflow(t, {
      start: 'ask',
      steps: {
        ask: { tool: 'web.costly', args: {}, next: 'mine' },
        mine: { tool: 'own.answer', args: {}, next: 'broken' },
        broken: { tool: 'web.costly', args: { fail: true }, retry: { maxAttempts: 1 }, onError: 'end' },
        end: { tool: 'core.echo', args: {}, done: true },
      },
    });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const byName = Object.fromEntries((await getSteps(t, id)).map((s) => [s.name, s]));
    expect(byName.ask!.usage).toEqual({ model: 'remote/big', inputTokens: 120, outputTokens: 30, cost: 0.25 });
    expect(byName.mine!.usage).toEqual({ model: 'local/llama', inputTokens: 10, outputTokens: 5, cost: 0.01 });
    expect(byName.broken!.status).toBe('failed');
    expect(byName.broken!.usage).toEqual({ model: 'remote/big', inputTokens: 120, outputTokens: 30, cost: 0.25 });
    expect(byName.end!.usage).toBeNull();
    expect(wf.usage).toEqual({ inputTokens: 250, outputTokens: 65, cost: 0.51 });
  });
});
