/** The arguments of `llm.chat` (docs/ai-steps.md), checked before any request is sent. */
import { z } from 'zod';
import { StepError } from '../../errors.js';

const role = z.enum(['system', 'developer', 'user', 'assistant']);

export const chatMessage = z.strictObject({
  role,
  /** Text, or content parts as the API takes them; any other value is sent as its JSON text. */
  content: z.unknown(),
  name: z.string().optional(),
});

export const llmChatArgs = z.strictObject({
  /** `provider/model`: a provider of the config's `llm.providers` and the model it serves. */
  model: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*\/.+$/, 'must be "provider/model", such as "main/gpt-4o-mini"'),
  messages: z.array(chatMessage).min(1, 'must hold at least one message'),
  /** JSON Schema of the answer: sent as response_format json_schema, and the answer is checked against it. */
  schema: z.record(z.string(), z.unknown()).optional(),
  /** Sent as json_schema.strict (OpenAI's strict structured outputs need every property required and additionalProperties false). */
  strict: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().positive().optional(),
});

export type LlmChatArgs = z.infer<typeof llmChatArgs>;

export function parseChatArgs(raw: unknown): LlmChatArgs {
  const parsed = llmChatArgs.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
  const summary = issues.map((i) => `${i.path || '(args)'}: ${i.message}`).join('; ');
  throw new StepError('bad_args', `invalid llm.chat arguments: ${summary}`, { retryable: false, details: { issues } });
}

/** A message as sent: text content as it is, anything else but content parts as JSON text. */
export function apiMessage(m: LlmChatArgs['messages'][number]): { role: string; content: unknown; name?: string } {
  const content = typeof m.content === 'string' || Array.isArray(m.content) ? m.content : JSON.stringify(m.content ?? null);
  return { role: m.role, content, ...(m.name !== undefined ? { name: m.name } : {}) };
}
