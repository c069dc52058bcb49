/**
 * The tools both test MCP servers offer. Every call and cancellation is recorded through
 * `record`, so tests can see what reached the server. Erasable TypeScript only: this file is
 * also run by `node file.ts` (type stripping).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CreateMessageResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

export type TestEvent = { event: string; [key: string]: unknown };

export interface TestToolState {
  record: (event: TestEvent) => void;
  current: number;
  max: number;
}

export interface TestToolOptions {
  /** Registers `crash`, which calls this mid-call (stdio: the process exits). */
  crash?: () => void;
}

/** A 1×1 PNG, base64: the image `mixed` returns. */
export const TINY_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

function text(value: string) {
  return { content: [{ type: 'text' as const, text: value }] };
}

function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export function registerTestTools(server: McpServer, state: TestToolState, options: TestToolOptions = {}): void {
  const { record } = state;

  server.registerTool('echo', { description: 'Returns its arguments as structuredContent.', inputSchema: z.looseObject({}) }, (args, extra) => {
    record({ event: 'call', tool: 'echo', args, meta: extra._meta });
    return { ...text(JSON.stringify(args)), structuredContent: args };
  });

  server.registerTool(
    'text',
    { description: 'Returns text content: `text`, or each of `parts` as its own block.', inputSchema: { text: z.string().optional(), parts: z.array(z.string()).optional() } },
    (args, extra) => {
      record({ event: 'call', tool: 'text', args, meta: extra._meta });
      const parts = args.parts ?? [args.text ?? ''];
      return { content: parts.map((p) => ({ type: 'text' as const, text: p })) };
    },
  );

  server.registerTool('mixed', { description: 'Returns text, a 1×1 PNG image and a resource link.' }, (extra) => {
    record({ event: 'call', tool: 'mixed', meta: extra._meta });
    return {
      content: [
        { type: 'text' as const, text: 'a pixel and a link' },
        { type: 'image' as const, data: TINY_PNG, mimeType: 'image/png', _meta: { dropped: true } },
        { type: 'resource_link' as const, uri: 'test://docs/1', name: 'doc-1', mimeType: 'text/plain', description: 'The first document' },
      ],
    };
  });

  server.registerTool('costly', { description: 'Answers with text and reports usage in the result\'s _meta.usage; `fail` reports an error (isError) with it.', inputSchema: { fail: z.boolean().optional() } }, (args, extra) => {
    record({ event: 'call', tool: 'costly', args, meta: extra._meta });
    return { ...text('a costly answer'), ...(args.fail ? { isError: true } : {}), _meta: { usage: { model: 'remote/big', inputTokens: 120, outputTokens: 30, cost: 0.25 } } };
  });

  server.registerTool('fail', { description: 'Reports an error (isError).', inputSchema: { message: z.string().optional() } }, (args, extra) => {
    record({ event: 'call', tool: 'fail', args, meta: extra._meta });
    return { ...text(args.message ?? 'it failed'), isError: true };
  });

  server.registerTool('sleep', { description: 'Waits `ms`; records when it was cancelled.', inputSchema: { ms: z.number() } }, async (args, extra) => {
    record({ event: 'call', tool: 'sleep', args, meta: extra._meta });
    const finished = await wait(args.ms, extra.signal);
    if (!finished) {
      record({ event: 'cancelled', tool: 'sleep', meta: extra._meta });
      return text('cancelled');
    }
    record({ event: 'done', tool: 'sleep' });
    return { ...text(JSON.stringify({ slept: args.ms })), structuredContent: { slept: args.ms } };
  });

  server.registerTool('meta', { description: 'Returns the _meta of the request.' }, (extra) => {
    record({ event: 'call', tool: 'meta', meta: extra._meta });
    return { ...text(JSON.stringify(extra._meta ?? null)), structuredContent: { meta: extra._meta ?? null } };
  });

  server.registerTool(
    'concurrency',
    { description: 'Holds a slot for `ms` and records how many calls run at once.', inputSchema: { ms: z.number() } },
    async (args, extra) => {
      state.current += 1;
      state.max = Math.max(state.max, state.current);
      record({ event: 'call', tool: 'concurrency', current: state.current, max: state.max, meta: extra._meta });
      await wait(args.ms, extra.signal);
      state.current -= 1;
      record({ event: 'done', tool: 'concurrency', current: state.current });
      return { ...text('{}'), structuredContent: { current: state.current, max: state.max } };
    },
  );

  server.registerTool(
    'progress',
    {
      description: 'Sends `count` progress notifications as fast as it can (when the call has a progressToken), then waits `ms`.',
      inputSchema: { count: z.number(), ms: z.number().optional() },
    },
    async (args, extra) => {
      const token = extra._meta?.progressToken;
      record({ event: 'call', tool: 'progress', args, meta: extra._meta });
      if (token !== undefined) {
        for (let i = 1; i <= args.count; i++) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: args.count, message: `item ${i}` } });
        }
      }
      if (args.ms) await wait(args.ms, extra.signal);
      return { ...text(JSON.stringify({ count: args.count })), structuredContent: { count: args.count, progressToken: token ?? null } };
    },
  );

  server.registerTool('sample', { description: 'Asks the client for sampling/createMessage and returns its answer or its error.' }, async (extra) => {
    record({ event: 'call', tool: 'sample', meta: extra._meta });
    try {
      const answer = await extra.sendRequest(
        { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }], maxTokens: 10 } },
        CreateMessageResultSchema,
      );
      return { ...text('answered'), structuredContent: { answer } };
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown };
      return { ...text('refused'), structuredContent: { error: { code: e.code ?? null, message: String(e.message) } } };
    }
  });

  const crash = options.crash;
  if (crash) {
    server.registerTool(
      'crash',
      {
        description: 'Exits the server in the middle of the call; with `untilAttempt: n`, only while `_meta.attempt` is below n.',
        inputSchema: { untilAttempt: z.number().optional() },
      },
      (args, extra) => {
        const attempt = typeof extra._meta?.attempt === 'number' ? extra._meta.attempt : 1;
        record({ event: 'call', tool: 'crash', args, meta: extra._meta });
        if (args.untilAttempt !== undefined && attempt >= args.untilAttempt) {
          return { ...text(JSON.stringify({ survived: attempt })), structuredContent: { survived: attempt } };
        }
        crash();
        return text('unreachable');
      },
    );
  }
}
