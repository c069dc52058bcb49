/** The `core.*` tools: echo, noop, sleep, fail. */
import { StepError } from '../errors.js';
import type { ToolContext, ToolInfo, ToolProvider } from './tool.js';

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new StepError('aborted', 'step was aborted', { retryable: true });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const TOOLS: ToolInfo[] = [
  { name: 'echo', description: 'Returns its arguments as its result.', inputSchema: { type: 'object' } },
  { name: 'noop', description: 'Does nothing; returns null.', inputSchema: { type: 'object' } },
  {
    name: 'sleep',
    description: 'Waits {ms} milliseconds (honours cancellation); returns {slept: ms}.',
    inputSchema: { type: 'object', properties: { ms: { type: 'number', minimum: 0 } }, required: ['ms'] },
  },
  {
    name: 'fail',
    description: 'Fails with {message}; {retryable} (default false) says whether another attempt may succeed; {code} sets the error code.',
    inputSchema: { type: 'object', properties: { message: { type: 'string' }, retryable: { type: 'boolean' }, code: { type: 'string' } } },
  },
];

/** The core tools that answer at once (no I/O, no timer): they take no tool slot. */
const INSTANT = new Set(['echo', 'noop', 'fail']);

export class CoreTools implements ToolProvider {
  readonly prefix = 'core';

  isInstant(tool: string): boolean {
    return INSTANT.has(tool);
  }

  async call(tool: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    const a = (typeof args === 'object' && args !== null ? args : {}) as Record<string, unknown>;
    switch (tool) {
      case 'echo':
        return args ?? null;
      case 'noop':
        return null;
      case 'sleep': {
        const ms = a.ms;
        if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
          throw new StepError('bad_args', 'core.sleep needs {"ms": a non-negative number}', { details: { args } });
        }
        await sleep(ms, ctx.signal);
        return { slept: ms };
      }
      case 'fail': {
        const message = typeof a.message === 'string' ? a.message : 'core.fail was called';
        const code = typeof a.code === 'string' && a.code ? a.code : 'failed';
        throw new StepError(code, message, { retryable: a.retryable === true });
      }
      default:
        throw new StepError('unknown_tool', `unknown tool "core.${tool}": core has ${TOOLS.map((t) => t.name).join(', ')}`, {
          details: { tool: `core.${tool}` },
        });
    }
  }

  async list(): Promise<ToolInfo[]> {
    return TOOLS;
  }
}
