/**
 * In-process function tools (`startStepd({ tools })`) as registry providers: one provider per
 * prefix, so `billing.charge` goes through the same registry, permissions, limits, timeouts and
 * secret redaction as `core.*`, `http.request` and MCP tools. Arguments are parsed by the tool's
 * schema before `run` (bad ones fail the step with `bad_args`).
 */
import { StepError } from '../errors.js';
import { checkFunctionTools, normalizeProgress, parseToolArgs, splitToolName, type FunctionTool, type FunctionTools } from './functionTool.js';
import type { ToolContext, ToolInfo, ToolProvider } from './tool.js';

export class FunctionToolProvider implements ToolProvider {
  readonly #tools: ReadonlyMap<string, FunctionTool<unknown, unknown>>;

  constructor(
    readonly prefix: string,
    tools: ReadonlyMap<string, FunctionTool<unknown, unknown>>,
  ) {
    this.#tools = tools;
  }

  async call(tool: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    const name = `${this.prefix}.${tool}`;
    const fn = this.#tools.get(tool);
    if (!fn) {
      throw new StepError('unknown_tool', `unknown tool "${name}": ${this.prefix} has ${[...this.#tools.keys()].join(', ')}`, { details: { tool: name } });
    }
    const parsed = parseToolArgs(name, fn, args);
    const onProgress = ctx.onProgress;
    const result = await fn.run(parsed, {
      workflowId: ctx.workflowId,
      stepId: ctx.stepId,
      attempt: ctx.attempt,
      user: ctx.user,
      idempotencyKey: ctx.idempotencyKey,
      signal: ctx.signal,
      progress: (p) => {
        const value = normalizeProgress(p);
        if (value && onProgress) onProgress(value);
      },
    });
    // A step's result is JSON: undefined (a function that returns nothing) is stored as null.
    return result === undefined ? null : result;
  }

  async list(): Promise<ToolInfo[]> {
    return [...this.#tools.entries()].map(([name, t]) => ({ name, ...(t.description ? { description: t.description } : {}) }));
  }
}

/** One provider per prefix of `tools` (checked: names and shapes). */
export function functionToolProviders(tools: FunctionTools): FunctionToolProvider[] {
  checkFunctionTools(tools, 'tools');
  const byPrefix = new Map<string, Map<string, FunctionTool<unknown, unknown>>>();
  for (const [name, tool] of Object.entries(tools)) {
    const [prefix, rest] = splitToolName(name);
    let group = byPrefix.get(prefix);
    if (!group) byPrefix.set(prefix, (group = new Map()));
    group.set(rest, tool as FunctionTool<unknown, unknown>);
  }
  return [...byPrefix.entries()].map(([prefix, group]) => new FunctionToolProvider(prefix, group));
}
