import { coerceError, StepError } from '../errors.js';
import type { Secrets } from '../secrets.js';
import type { ToolContext, ToolInfo, ToolProvider } from './tool.js';

export interface ToolRegistryOptions {
  /** Redacted from every result and error a tool hands back, before it is stored or logged. */
  secrets?: Secrets;
}

/** Maps `prefix.tool` names to providers. Built by the caller; no global state. */
export class ToolRegistry {
  private readonly providers = new Map<string, ToolProvider>();
  readonly #secrets: Secrets | undefined;

  constructor(providers: ToolProvider[] = [], options: ToolRegistryOptions = {}) {
    this.#secrets = options.secrets;
    for (const p of providers) this.add(p);
  }

  add(provider: ToolProvider): void {
    if (this.providers.has(provider.prefix)) throw new Error(`tool provider "${provider.prefix}" is registered twice`);
    this.providers.set(provider.prefix, provider);
  }

  prefixes(): string[] {
    return [...this.providers.keys()].sort();
  }

  has(prefix: string): boolean {
    return this.providers.has(prefix);
  }

  async call(name: string, args: unknown, ctx: ToolContext): Promise<unknown> {
    const dot = name.indexOf('.');
    const prefix = dot > 0 ? name.slice(0, dot) : '';
    const provider = this.providers.get(prefix);
    if (!provider || dot === name.length - 1) {
      throw new StepError('unknown_tool', `unknown tool "${name}": known tool servers are ${this.prefixes().join(', ')}`, {
        retryable: false,
        details: { tool: name, servers: this.prefixes() },
      });
    }
    const secrets = this.#secrets;
    if (!secrets) return provider.call(name.slice(dot + 1), args, ctx);
    let result: unknown;
    try {
      result = await provider.call(name.slice(dot + 1), args, ctx);
    } catch (err) {
      throw redactError(err, secrets);
    }
    return secrets.redactValue(result);
  }

  /** Whether a `prefix.tool` answers at once (ToolProvider.isInstant): its steps take no tool slot. */
  isInstant(name: string): boolean {
    const dot = name.indexOf('.');
    if (dot <= 0) return false;
    return this.providers.get(name.slice(0, dot))?.isInstant?.(name.slice(dot + 1)) === true;
  }

  /** Whether a `prefix.tool` is served by workers (ToolProvider.servedByWorkers), and their default timeout. */
  servedByWorkers(name: string): { timeoutMs?: number } | undefined {
    const dot = name.indexOf('.');
    if (dot <= 0 || dot === name.length - 1) return undefined;
    return this.providers.get(name.slice(0, dot))?.servedByWorkers?.(name.slice(dot + 1));
  }

  async list(): Promise<ToolInfo[]> {
    const all: ToolInfo[] = [];
    for (const p of this.providers.values()) {
      for (const t of await p.list()) all.push({ ...t, name: `${p.prefix}.${t.name}` });
    }
    return all;
  }

  /** The tools of one provider (names without the prefix); undefined when no provider has that prefix. */
  async listOf(prefix: string): Promise<ToolInfo[] | undefined> {
    return this.providers.get(prefix)?.list();
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.providers.values()].map((p) => p.close?.()));
  }
}

/**
 * The error a tool threw, as it may be stored: message, details and stack redacted. An error
 * that held a secret is replaced by a new StepError without its cause (the cause may hold the
 * secret too); `retryAfterMs` is kept.
 */
export function redactError(err: unknown, secrets: Secrets): StepError {
  const e = coerceError(err);
  const message = secrets.redact(e.message);
  const details = secrets.redactValue(e.details);
  const stack = e.stack === undefined ? undefined : secrets.redact(e.stack);
  const causeText = e.cause instanceof Error ? `${e.cause.message}\n${e.cause.stack ?? ''}` : e.cause === undefined ? '' : String(e.cause);
  if (message === e.message && details === e.details && stack === e.stack && !secrets.appearsIn(causeText)) return e;
  const clean = new StepError(e.code, message, { retryable: e.retryable, details });
  clean.name = e.name;
  if (stack !== undefined) clean.stack = stack;
  const retryAfterMs = (e as { retryAfterMs?: unknown }).retryAfterMs;
  if (typeof retryAfterMs === 'number') Object.assign(clean, { retryAfterMs });
  return clean;
}
