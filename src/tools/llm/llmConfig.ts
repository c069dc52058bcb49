/**
 * The config's `llm` section (docs/ai-steps.md): model providers speaking the OpenAI-compatible
 * chat-completions API, their prices, and the operator's cost budgets per user.
 *
 *   "llm": {
 *     "providers": { "main": { "baseUrl": "https://api.openai.com/v1", "apiKey": "${OPENAI_API_KEY}",
 *                              "prices": { "gpt-4o-mini": { "input": 0.15, "output": 0.60 } } } },
 *     "budgets": { "default": 5, "users": { "james": 20 } }
 *   }
 *
 * Prices are per million tokens; a cost budget caps what one workflow run as that user may spend.
 */
import { z } from 'zod';

const PROVIDER_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;
const cost = z.number().nonnegative('must not be negative').finite();

export const llmPriceSchema = z.strictObject({ input: cost, output: cost });

export const llmProviderSchema = z.strictObject({
  baseUrl: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL such as "https://api.openai.com/v1"' }),
  /** Sent as `Authorization: Bearer …`; use "${VAR}" so it stays out of the file (and is redacted). */
  apiKey: z.string().optional(),
  /** Per model, per million tokens. A model without a price costs 0. */
  prices: z.record(z.string().min(1), llmPriceSchema).optional(),
  /** Extra request headers (an Azure `api-key`, a gateway's routing header). */
  headers: z.record(z.string(), z.string()).optional(),
  /** Milliseconds one request may take (default: the step's timeout alone). */
  timeoutMs: z.number().int().positive().optional(),
});

export const llmConfigSchema = z.strictObject({
  providers: z.record(z.string().regex(PROVIDER_NAME, 'must start with a letter and hold only letters, digits, "-" and "_"'), llmProviderSchema).optional(),
  /** Cost budgets per workflow, by the user it runs as: `default` for users not listed. */
  budgets: z.strictObject({ default: cost.optional(), users: z.record(z.string().min(1), cost).optional() }).optional(),
});

export type LlmPrice = z.infer<typeof llmPriceSchema>;
export type LlmProviderConfig = z.infer<typeof llmProviderSchema>;
export type LlmConfig = z.infer<typeof llmConfigSchema>;

/** `provider/model` → its parts; undefined when it has no `/` or an empty side. */
export function splitModel(model: string): { provider: string; model: string } | undefined {
  const slash = model.indexOf('/');
  if (slash <= 0 || slash === model.length - 1) return undefined;
  return { provider: model.slice(0, slash), model: model.slice(slash + 1) };
}

/** The operator's cost cap for workflows run as `user` (undefined: none). */
export function userCostBudget(config: LlmConfig | undefined, user: string | null): number | undefined {
  const budgets = config?.budgets;
  if (!budgets) return undefined;
  return (user !== null ? budgets.users?.[user] : undefined) ?? budgets.default;
}
