/**
 * A tool written as a function: the shape shared by the library's in-process tools
 * (`startStepd({ tools })`, src/lib/) and the worker SDK's (`createWorker({ tools })`,
 * src/worker/). Its arguments are checked against its `input` schema before `run` is called; a
 * bad argument fails the step with `bad_args` (not retryable) and `run` never sees it. Pure: no I/O.
 */
import { StepError } from '../errors.js';

/**
 * What an input schema must offer: zod's `safeParse` (zod 3 and 4 both have it), or any object
 * with the same shape. The parsed value (defaults applied, transforms run) is what `run` gets.
 */
export interface InputSchema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: { message: string; issues?: readonly SchemaIssue[] } };
}

/** One problem a schema found (zod's issue shape, of which only these fields are used). */
export interface SchemaIssue {
  path?: readonly PropertyKey[];
  message: string;
}

/** How far a call has got: a number that grows, of `total` when known, with an optional message. */
export interface FunctionToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What a function tool is told about the step it runs. */
export interface FunctionToolContext {
  workflowId: string;
  stepId: string;
  /** 1 for the first attempt, then 2, 3, … (a retry or a lost attempt taken again). */
  attempt: number;
  /** The user the step runs as (the workflow's created_by). */
  user: string | null;
  /** The same on every attempt of one step: pass it on to services that dedupe (a payment API). */
  idempotencyKey: string;
  /** Aborted when the workflow is cancelled, the step times out, its lease is lost or the process stops. */
  signal: AbortSignal;
  /** Reports progress (kept on the step row, throttled; shown by `stepd status` and the dashboard). */
  progress(progress: number | FunctionToolProgress): void;
}

/** A tool as a function, with an optional input schema (zod). */
export interface FunctionTool<Args = unknown, Result = unknown> {
  input?: InputSchema<Args>;
  description?: string;
  run(args: Args, ctx: FunctionToolContext): Promise<Result> | Result;
}

/** Tools by their full name (`billing.charge`): `{ [name]: { input?, run } }`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type FunctionTools = Record<string, FunctionTool<any, unknown>>;

/**
 * Tools whose `run` arguments TypeScript infers from each tool's `input` schema (what
 * `startStepd` and `createWorker` take): `Args` maps each tool name to its parsed arguments.
 */
export type TypedFunctionTools<Args extends Record<string, unknown>> = { [K in keyof Args]: FunctionTool<Args[K], unknown> };

/**
 * Types one tool's `run` from its `input` schema:
 * `defineTool({ input: z.object({ cents: z.number() }), run: async ({ cents }) => … })`.
 */
export function defineTool<Args, Result>(tool: FunctionTool<Args, Result>): FunctionTool<Args, Result> {
  return tool;
}

/** A tool name: `prefix.tool`, both parts of letters, digits, `_` and `-` (the tool part may hold dots). */
const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_-]*\.[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

/** Throws a TypeError naming every badly named or shaped tool, so a typo fails at start, not at the first step. */
export function checkFunctionTools(tools: FunctionTools, where: string): void {
  const problems: string[] = [];
  for (const [name, tool] of Object.entries(tools)) {
    if (!TOOL_NAME.test(name)) problems.push(`"${name}": a tool name is "prefix.tool" (like "billing.charge")`);
    if (typeof tool !== 'object' || tool === null || typeof tool.run !== 'function') problems.push(`"${name}": needs a run(args, ctx) function`);
    else if (tool.input !== undefined && typeof (tool.input as { safeParse?: unknown }).safeParse !== 'function') {
      problems.push(`"${name}": input must be a schema with safeParse (a zod schema)`);
    }
  }
  if (problems.length > 0) throw new TypeError(`${where}: ${problems.join('; ')}`);
}

/** The arguments `run` gets: parsed by the tool's schema, or a `bad_args` StepError (not retryable) saying what is wrong. */
export function parseToolArgs<Args>(name: string, tool: FunctionTool<Args, unknown>, args: unknown): Args {
  if (!tool.input) return args as Args;
  const parsed = tool.input.safeParse(args);
  if (parsed.success) return parsed.data;
  const issues = (parsed.error.issues ?? []).map((i) => ({ path: (i.path ?? []).map((p) => (typeof p === 'symbol' ? String(p) : p)).join('.'), message: i.message }));
  const said = issues.length > 0 ? issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ') : parsed.error.message;
  throw new StepError('bad_args', `${name}: bad arguments: ${said}`, { retryable: false, details: { tool: name, issues } });
}

/** A progress report as the step row keeps it; a bare number is `{progress: n}`; anything unusable is undefined. */
export function normalizeProgress(p: number | FunctionToolProgress): FunctionToolProgress | undefined {
  const value = typeof p === 'number' ? { progress: p } : p;
  if (typeof value !== 'object' || value === null || typeof value.progress !== 'number' || !Number.isFinite(value.progress)) return undefined;
  const out: FunctionToolProgress = { progress: value.progress };
  if (typeof value.total === 'number' && Number.isFinite(value.total)) out.total = value.total;
  if (typeof value.message === 'string') out.message = value.message;
  return out;
}

/** Splits `billing.charge` into its prefix and tool: `['billing', 'charge']`. */
export function splitToolName(name: string): [prefix: string, tool: string] {
  const dot = name.indexOf('.');
  return [name.slice(0, dot), name.slice(dot + 1)];
}
