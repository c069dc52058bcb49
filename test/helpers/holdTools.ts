/**
 * A tool provider whose calls (`hold.wait`) answer only when the test releases their workflow:
 * steps that stay running for as long as a test needs, then finish together in one tick.
 */
import type { ToolProvider } from '../../src/tools/tool.js';

export type HoldTools = ToolProvider & {
  /** The calls in flight, by workflow id. */
  waiting: Map<string, () => void>;
  /** Answers the calls of these workflows (with their args), in the same tick. */
  release: (...workflowIds: string[]) => void;
};

export function holdTools(): HoldTools {
  const waiting = new Map<string, () => void>();
  return {
    prefix: 'hold',
    waiting,
    release: (...ids) => {
      for (const id of ids) waiting.get(id)?.();
    },
    call: (_tool, args, ctx) => new Promise((resolve) => waiting.set(ctx.workflowId, () => resolve(args))),
    list: async () => [{ name: 'wait' }],
  };
}
