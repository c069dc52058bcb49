/**
 * The `llm.chat` built-in (docs/ai-steps.md): one call of the OpenAI-compatible chat-completions
 * API through the official `openai` client, to a provider of the config's `llm.providers`.
 *
 *   args    { model: "provider/model", messages, schema?, strict?, temperature?, maxTokens? }
 *   result  { text, json?, usage: { inputTokens, outputTokens, cost }, model, finishReason }
 *
 * With a `schema`, the request asks for structured output (response_format json_schema) and the
 * answer is parsed and checked with ajv: an answer that is not JSON or does not match fails the
 * attempt with `invalid_output` (retryable: another attempt may answer well). Usage (tokens, and
 * the cost at the provider's prices per million tokens) is reported to the step for every
 * answered call, also one whose answer was refused. The client's own retries are off: stepd's
 * step retry decides (chatErrors.ts). The request goes through the egress policy (egressFetch.ts)
 * and is aborted with the step's signal (cancel, timeout, shutdown).
 */
import OpenAI from 'openai';
import { z } from 'zod';
import { StepError } from '../../errors.js';
import { SchemaCompiler, type SchemaCheck } from '../../flow/jsonSchema.js';
import type { Logger } from '../../logger.js';
import type { Secrets } from '../../secrets.js';
import { priced, type StepUsage } from '../../usage/stepUsage.js';
import { EgressPolicy } from '../egress.js';
import type { Connector } from '../httpSend.js';
import type { ToolContext, ToolInfo, ToolProvider } from '../tool.js';
import { apiMessage, llmChatArgs, parseChatArgs, type LlmChatArgs } from './chatArgs.js';
import { chatError } from './chatErrors.js';
import { egressFetch } from './egressFetch.js';
import { splitModel, type LlmConfig, type LlmProviderConfig } from './llmConfig.js';

export interface LlmChatResult {
  text: string | null;
  json?: unknown;
  usage: { inputTokens: number; outputTokens: number; cost: number };
  model: string;
  finishReason: string | null;
}

export interface LlmToolOptions {
  config?: LlmConfig | undefined;
  egress?: EgressPolicy;
  connect?: Connector;
  secrets?: Secrets;
  log?: Logger;
  now?: () => number;
}

/** Compiled answer schemas kept per provider instance (by their JSON text). */
const MAX_CACHED_SCHEMAS = 200;
/** One request may take this long when neither the provider nor the step says less. */
const DEFAULT_REQUEST_TIMEOUT_MS = 10 * 60_000;

export class LlmToolProvider implements ToolProvider {
  readonly prefix = 'llm';
  readonly #providers: Record<string, LlmProviderConfig>;
  readonly #egress: EgressPolicy;
  readonly #connect: Connector | undefined;
  readonly #secrets: Secrets | undefined;
  readonly #log: Logger | undefined;
  readonly #now: () => number;
  readonly #schemas = new Map<string, SchemaCheck>();

  constructor(options: LlmToolOptions = {}) {
    this.#providers = options.config?.providers ?? {};
    this.#egress = options.egress ?? new EgressPolicy();
    this.#connect = options.connect;
    this.#secrets = options.secrets;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
  }

  /** The configured provider names (for `stepd validate`). */
  providerNames(): string[] {
    return Object.keys(this.#providers).sort();
  }

  async list(): Promise<ToolInfo[]> {
    return [
      {
        name: 'chat',
        description:
          'Calls a model through an OpenAI-compatible chat-completions API: {model: "provider/model", messages, schema?, temperature?, maxTokens?} → {text, json?, usage, model, finishReason}.',
        inputSchema: z.toJSONSchema(llmChatArgs, { io: 'input', unrepresentable: 'any' }),
      },
    ];
  }

  async call(tool: string, rawArgs: unknown, ctx: ToolContext): Promise<LlmChatResult> {
    if (tool !== 'chat') {
      throw new StepError('unknown_tool', `unknown tool "llm.${tool}": the llm server has only "chat"`, { retryable: false, details: { tool: `llm.${tool}`, tools: ['llm.chat'] } });
    }
    const args = parseChatArgs(rawArgs);
    const { provider: providerName, model } = splitModel(args.model)!;
    const provider = this.#providers[providerName];
    if (!provider) {
      const known = this.providerNames();
      throw new StepError('unknown_provider', `llm.chat: no provider "${providerName}" in the config's llm.providers${known.length ? ` (it has ${known.join(', ')})` : ' (it has none)'}`, {
        retryable: false,
        details: { provider: providerName, providers: known },
      });
    }
    const check = args.schema === undefined ? undefined : this.#compile(args.schema);
    const what = `llm.chat ${args.model}`;
    if (ctx.signal.aborted) throw chatError(new Error('aborted'), what, ctx.signal, this.#secrets, this.#now());
    const client = new OpenAI({
      apiKey: provider.apiKey ?? 'none',
      baseURL: provider.baseUrl,
      organization: null,
      project: null,
      maxRetries: 0,
      timeout: provider.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      fetch: egressFetch({ egress: this.#egress, user: ctx.user, ...(this.#connect ? { connect: this.#connect } : {}) }),
      defaultHeaders: { ...provider.headers, 'Idempotency-Key': ctx.idempotencyKey, ...(ctx.traceparent ? { traceparent: ctx.traceparent } : {}) },
    });
    let completion: OpenAI.Chat.Completions.ChatCompletion;
    try {
      completion = await client.chat.completions.create(requestBody(args, model), { signal: ctx.signal });
    } catch (err) {
      throw chatError(err, what, ctx.signal, this.#secrets, this.#now());
    }
    const usage = usageOf(completion, args.model, provider.prices?.[model]);
    ctx.reportUsage?.(usage);
    this.#log?.debug({ workflowId: ctx.workflowId, stepId: ctx.stepId, model: args.model, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens }, 'llm.chat answered');
    const choice = completion.choices?.[0];
    const text = typeof choice?.message?.content === 'string' ? choice.message.content : null;
    const result: LlmChatResult = {
      text,
      usage: { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cost: usage.cost },
      model: typeof completion.model === 'string' && completion.model ? completion.model : model,
      finishReason: choice?.finish_reason ?? null,
    };
    if (check) result.json = checkedAnswer(text, check, what, result.finishReason);
    return result;
  }

  #compile(schema: Record<string, unknown>): SchemaCheck {
    const key = JSON.stringify(schema);
    const cached = this.#schemas.get(key);
    if (cached) return cached;
    const compiled = new SchemaCompiler().compile(schema);
    if (!compiled.ok) throw new StepError('bad_args', `invalid llm.chat arguments: schema: ${compiled.message}`, { retryable: false });
    if (this.#schemas.size >= MAX_CACHED_SCHEMAS) this.#schemas.delete(this.#schemas.keys().next().value as string);
    this.#schemas.set(key, compiled.check);
    return compiled.check;
  }
}

function requestBody(args: LlmChatArgs, model: string): OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming {
  const body: Record<string, unknown> = { model, messages: args.messages.map(apiMessage) };
  if (args.temperature !== undefined) body.temperature = args.temperature;
  if (args.maxTokens !== undefined) body.max_tokens = args.maxTokens;
  if (args.schema !== undefined) {
    body.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: args.schema, ...(args.strict !== undefined ? { strict: args.strict } : {}) } };
  }
  return body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
}

function usageOf(completion: OpenAI.Chat.Completions.ChatCompletion, model: string, price: { input: number; output: number } | undefined): StepUsage {
  const u = completion.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
  const inputTokens = tokens(u?.prompt_tokens);
  const outputTokens = tokens(u?.completion_tokens);
  return { model, inputTokens, outputTokens, cost: priced(inputTokens, price?.input) + priced(outputTokens, price?.output) };
}

function tokens(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.round(value) : 0;
}

/** The answer as JSON, checked against the schema; `invalid_output` (retryable) when it is not. */
function checkedAnswer(text: string | null, check: SchemaCheck, what: string, finishReason: string | null): unknown {
  const cut = finishReason === 'length' ? ' (the answer was cut at maxTokens)' : '';
  let json: unknown;
  try {
    json = JSON.parse(text ?? '');
  } catch {
    throw new StepError('invalid_output', `${what}: the answer is not JSON${cut}`, { retryable: true, details: { answer: (text ?? '').slice(0, 1024) } });
  }
  const issues = check.check(json, 'answer');
  if (issues.length > 0) {
    const summary = issues.map((i) => `${i.path}: ${i.message}`).join('; ');
    const answer = JSON.stringify(json);
    throw new StepError('invalid_output', `${what}: the answer does not match the schema: ${summary}`, { retryable: true, details: { issues, answer: answer.length > 1024 ? answer.slice(0, 1024) : json } });
  }
  return json;
}
