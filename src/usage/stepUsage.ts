/**
 * What one step attempt spent: tokens and cost (docs/ai-steps.md). `llm.chat` reports it through
 * ToolContext.reportUsage, so may an MCP tool (`_meta.usage` of its result) and any tool or
 * worker whose result carries a `usage` object. The executor records it on the step row with
 * the attempt's outcome (sql/0030 adds it to the workflow's row), whatever the tool.
 */

export interface StepUsage {
  /** `provider/model` for llm.chat; whatever the tool said otherwise (cut to 200 characters). */
  model?: string;
  inputTokens: number;
  outputTokens: number;
  /** In the currency of the config's prices; 0 when the tool reported no cost and has no price. */
  cost: number;
}

/** A workflow's sum (sql/0030: its steps and its ended sub-workflows). */
export interface UsageTotal {
  inputTokens: number;
  outputTokens: number;
  cost: number;
}

const MAX_TOKENS = 1e12;
const MAX_COST = 1e9;

function count(value: unknown, max: number): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.min(value, max) : 0;
}

/**
 * A reported usage as stored, or undefined when `raw` is not one: an object with at least one of
 * `inputTokens`/`outputTokens`/`cost` (also `input_tokens`/`prompt_tokens` and
 * `output_tokens`/`completion_tokens`, as model APIs name them) as non-negative numbers.
 */
export function normalizeUsage(raw: unknown): StepUsage | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  const input = r.inputTokens ?? r.input_tokens ?? r.prompt_tokens;
  const output = r.outputTokens ?? r.output_tokens ?? r.completion_tokens;
  if (![input, output, r.cost].some((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0)) return undefined;
  const usage: StepUsage = { inputTokens: Math.round(count(input, MAX_TOKENS)), outputTokens: Math.round(count(output, MAX_TOKENS)), cost: count(r.cost, MAX_COST) };
  if (typeof r.model === 'string' && r.model !== '') usage.model = r.model.slice(0, 200);
  return usage;
}

/** The sum of two usages (either may be absent); the model is kept when both name the same one. */
export function addUsage(a: StepUsage | undefined, b: StepUsage | undefined): StepUsage | undefined {
  if (!a) return b;
  if (!b) return a;
  const sum: StepUsage = { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens, cost: a.cost + b.cost };
  if (a.model !== undefined && a.model === b.model) sum.model = a.model;
  return sum;
}

/**
 * The usage to record for an attempt's outcome: what the tool reported during the call, else the
 * `usage` of a done result (a worker's or an in-process tool's result, an MCP structured result).
 */
export function outcomeUsage(outcome: { status: 'done'; result: unknown } | { status: 'failed' }, reported?: StepUsage): StepUsage | undefined {
  if (reported) return reported;
  if (outcome.status !== 'done') return undefined;
  const result = outcome.result;
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return undefined;
  return normalizeUsage((result as { usage?: unknown }).usage);
}

/** Cost of `tokens` at `perMillion` per million tokens. */
export function priced(tokens: number, perMillion: number | undefined): number {
  return perMillion === undefined ? 0 : (tokens * perMillion) / 1_000_000;
}

/** A cost as text: `$0.0123` style without the sign (the currency is the operator's). */
export function formatCost(cost: number): string {
  if (cost === 0) return '0';
  if (cost >= 1) return cost.toFixed(2);
  return cost.toPrecision(3).replace(/0+$/, '').replace(/\.$/, '');
}

/** `1,234 in / 56 out tokens, cost 0.0123`, or undefined when there is no usage. */
export function describeUsage(usage: unknown): string | undefined {
  const u = normalizeUsage(usage);
  if (!u) return undefined;
  return `${u.inputTokens.toLocaleString('en-US')} in / ${u.outputTokens.toLocaleString('en-US')} out tokens, cost ${formatCost(u.cost)}`;
}
