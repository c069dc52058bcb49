/**
 * Tokens and cost in /metrics (docs/ai-steps.md): `stepd_usage_tokens_total{model, user,
 * direction}` (direction `input` or `output`) and `stepd_usage_cost_total{model, user}`, counted
 * as each step attempt reports its usage on this executor (also an attempt whose answer was then
 * refused: its tokens were spent). Both labels come from rows that clients write (`created_by`)
 * or tools report (`model`), so each is bounded like tool names (ToolLabels): the first 100
 * distinct values keep their own label, later ones count as `other`. A step without a model is
 * `none`; a workflow without a user is `none`.
 */
import { Counter, type Registry } from 'prom-client';
import type { StepUsage } from '../usage/stepUsage.js';
import { ToolLabels } from './toolLabels.js';

/** Distinct models and users with a label of their own. */
export const MAX_USAGE_LABELS = 100;

export class UsageMetrics {
  private readonly tokens: Counter<'model' | 'user' | 'direction'>;
  private readonly cost: Counter<'model' | 'user'>;
  private readonly models = new ToolLabels(MAX_USAGE_LABELS);
  private readonly users = new ToolLabels(MAX_USAGE_LABELS);

  constructor(registers: Registry[]) {
    this.tokens = new Counter({
      name: 'stepd_usage_tokens_total',
      help: 'Tokens step attempts reported on this executor (llm.chat, MCP tools, tools whose result has a usage), by model, user and direction (input, output). Model and user labels are bounded: later distinct values count as "other".',
      labelNames: ['model', 'user', 'direction'],
      registers,
    });
    this.cost = new Counter({
      name: 'stepd_usage_cost_total',
      help: "Cost step attempts reported on this executor, in the currency of the config's llm prices, by model and user (bounded as for tokens).",
      labelNames: ['model', 'user'],
      registers,
    });
  }

  add(user: string | null, usage: StepUsage): void {
    const labels = { model: this.models.label(usage.model ?? null), user: this.users.label(user) };
    if (usage.inputTokens > 0) this.tokens.inc({ ...labels, direction: 'input' }, usage.inputTokens);
    if (usage.outputTokens > 0) this.tokens.inc({ ...labels, direction: 'output' }, usage.outputTokens);
    if (usage.cost > 0) this.cost.inc(labels, usage.cost);
  }
}
