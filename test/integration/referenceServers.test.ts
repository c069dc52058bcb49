/**
 * Workflows calling the MCP reference servers from npm, as a user would configure them:
 * server-everything over stdio and over Streamable HTTP, server-memory and server-filesystem
 * over stdio. Every content block is kept, progress reaches the step row, a tool that requires
 * task-based execution runs as an MCP task, elicitation is declined.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { McpServerConfig } from '../../src/configFile.js';
import { createMcpProviders, type McpServerProvider } from '../../src/tools/mcp/index.js';
import { createTestSchema, getSteps, insertWorkflow, onCleanup, startExecutor, waitFor, waitForWorkflow, type TestSchema } from '../helpers/db.js';
import { tempDirSync } from '../helpers/isolation.js';
import { everythingHttp, everythingStdio, filesystemStdio, memoryStdio, type EverythingHttp } from '../mcp-servers/referenceServers.js';
import { silentLogger } from '../tools/helpers.js';

let http: EverythingHttp;
beforeAll(async () => {
  http = await everythingHttp();
});
afterAll(async () => {
  await http.close();
});

/** A fresh schema and an executor with these MCP servers. */
async function setup(servers: Record<string, McpServerConfig>): Promise<{ t: TestSchema; providers: McpServerProvider[] }> {
  const t = await createTestSchema();
  const providers = createMcpProviders(servers, { log: silentLogger(), idleMs: 60_000 });
  onCleanup(async () => {
    await Promise.all(providers.map((p) => p.close()));
  });
  await startExecutor(t, { tools: providers });
  return { t, providers };
}

const everything = (transport: 'stdio' | 'http'): McpServerConfig => (transport === 'stdio' ? everythingStdio() : { url: http.url });

describe.each(['stdio', 'http'] as const)('server-everything over %s', (transport) => {
  it('lists its tools with their input schemas', async () => {
    const { providers } = await setup({ everything: everything(transport) });
    const tools = await providers[0]!.list();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['echo', 'get-sum', 'get-tiny-image', 'get-resource-links', 'trigger-long-running-operation', 'simulate-research-query']));
    expect(tools.find((t) => t.name === 'get-sum')?.inputSchema).toMatchObject({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } });
  });

  it('keeps the image and the resource links of a result, and the text beside them', async () => {
    const { t } = await setup({ everything: everything(transport) });
    const flow = {
      start: 'image',
      steps: {
        image: { tool: 'everything.get-tiny-image', next: 'links' },
        links: { tool: 'everything.get-resource-links', args: { count: 2 }, next: 'use' },
        use: { tool: 'core.echo', args: { mime: '{{steps.image.result.content[1].mimeType}}', uri: '{{steps.links.result.content[1].uri}}' }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    const [image, links] = await getSteps(t, id);
    const imageResult = image?.result as { text: string; content: { type: string; data?: string; mimeType?: string }[] };
    expect(imageResult.text).toContain("Here's the image you requested");
    expect(imageResult.content.map((b) => b.type)).toEqual(['text', 'image', 'text']);
    expect(imageResult.content[1]).toMatchObject({ type: 'image', mimeType: 'image/png' });
    expect(Buffer.from(imageResult.content[1]!.data!, 'base64').subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(links?.result).toMatchObject({
      text: expect.stringContaining('2 resource links'),
      content: [
        { type: 'text' },
        { type: 'resource_link', uri: 'demo://resource/dynamic/blob/1', name: 'Blob Resource 1', mimeType: 'text/plain' },
        { type: 'resource_link', uri: 'demo://resource/dynamic/text/2', name: 'Text Resource 2' },
      ],
    });
    expect(wf.output).toEqual({ mime: 'image/png', uri: 'demo://resource/dynamic/blob/1' });
  });

  it('records the progress of a long-running operation on the running step row', async () => {
    const { t } = await setup({ everything: everything(transport) });
    const flow = { start: 'long', steps: { long: { tool: 'everything.trigger-long-running-operation', args: { duration: 2, steps: 4 }, done: true } } };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const seen = await waitFor(async () => {
      const [step] = await getSteps(t, id);
      return step?.status === 'running' && step.progress ? step.progress : undefined;
    }, 'progress on the running step');
    expect(seen).toMatchObject({ progress: expect.any(Number), total: 4 });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toContain('Long running operation completed');
    const [step] = await getSteps(t, id);
    expect(step?.progress).toMatchObject({ total: 4 });
  });

  it('runs a tool that requires task-based execution as an MCP task; its elicitation is declined', async () => {
    const { t } = await setup({ everything: everything(transport) });
    const flow = { start: 'research', steps: { research: { tool: 'everything.simulate-research-query', args: { topic: 'tides', ambiguous: true }, done: true } } };
    const id = await insertWorkflow(t, flow, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toContain('# Research Report: tides (User declined');
  });

  it('answers an elicitation request with a decline', async () => {
    const { t } = await setup({ everything: everything(transport) });
    const id = await insertWorkflow(t, { start: 'ask', steps: { ask: { tool: 'everything.trigger-elicitation-request', done: true } } }, {}, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toContain('declined');
  });
});

describe('server-memory and server-filesystem over stdio', () => {
  it('builds a knowledge graph in one step and reads it in the next', async () => {
    const { t } = await setup({ memory: memoryStdio() });
    const flow = {
      start: 'remember',
      steps: {
        remember: {
          tool: 'memory.create_entities',
          args: { entities: [{ name: '{{input.who}}', entityType: 'person', observations: ['runs workflows'] }] },
          next: 'recall',
        },
        recall: { tool: 'memory.read_graph', done: true },
      },
    };
    const id = await insertWorkflow(t, flow, { who: 'Ada' }, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(wf.status).toBe('completed');
    expect(wf.output).toMatchObject({ entities: [{ name: 'Ada', entityType: 'person', observations: ['runs workflows'] }], relations: [] });
  });

  it('writes a file in its allowed folder and reads it back; a path outside is a tool error', async () => {
    const dir = tempDirSync('stepd-fs-');
    const { t } = await setup({ files: filesystemStdio(dir) });
    const flow = {
      start: 'write',
      steps: {
        write: { tool: 'files.write_file', args: { path: join(dir, 'note.txt'), content: 'hello {{input.who}}' }, next: 'read' },
        read: { tool: 'files.read_text_file', args: { path: join(dir, 'note.txt') }, next: 'outside' },
        outside: { tool: 'files.read_text_file', args: { path: '/etc/hostname' }, onError: 'report', done: true },
        report: { tool: 'core.echo', args: { read: '{{steps.read.result}}' }, done: true },
      },
    };
    const id = await insertWorkflow(t, flow, { who: 'Ada' }, { user: 'alice' });
    const wf = await waitForWorkflow(t, id);
    expect(readFileSync(join(dir, 'note.txt'), 'utf8')).toBe('hello Ada');
    const steps = await getSteps(t, id);
    expect(steps.find((s) => s.name === 'outside')?.error).toMatchObject({ code: 'tool_error' });
    expect(wf.status).toBe('completed');
    expect(wf.output).toEqual({ read: { content: 'hello Ada' } });
  });
});
