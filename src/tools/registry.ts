import { StepError } from '../errors.js';
import type { ToolContext, ToolInfo, ToolProvider } from './tool.js';

/** Maps `prefix.tool` names to providers. Built by the caller; no global state. */
export class ToolRegistry {
  private readonly providers = new Map<string, ToolProvider>();

  constructor(providers: ToolProvider[] = []) {
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
    return provider.call(name.slice(dot + 1), args, ctx);
  }

  async list(): Promise<ToolInfo[]> {
    const all: ToolInfo[] = [];
    for (const p of this.providers.values()) {
      for (const t of await p.list()) all.push({ ...t, name: `${p.prefix}.${t.name}` });
    }
    return all;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.providers.values()].map((p) => p.close?.()));
  }
}
