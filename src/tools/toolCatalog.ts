/**
 * What `stepd validate` knows about tools: the built-ins always, and each configured MCP server's
 * tools once it has been asked (listing connects; a server no flow uses is never started).
 */
import type { Toolbox } from './toolbox.js';
import type { ToolInfo } from './tool.js';

/** Prefixes that are not MCP servers: always known, without a config. */
export const BUILTIN_PREFIXES: readonly string[] = ['core', 'http'];

export type ServerTools =
  /** The server answered (or is built in): these are its tools, names without the prefix. */
  | { state: 'listed'; builtin: boolean; tools: ToolInfo[] }
  /** Configured, but it did not answer in time or failed to start. */
  | { state: 'unreachable'; error: string }
  /** A config was read and has no such server. */
  | { state: 'unknown'; servers: string[] }
  /** Served by workers (config `workers`): any tool name under the prefix, arguments unchecked. */
  | { state: 'worker' }
  /** No config was read, so MCP servers cannot be checked. */
  | { state: 'unchecked' };

export interface ToolLookup {
  tools(prefix: string): Promise<ServerTools>;
}

export const DEFAULT_LIST_TIMEOUT_MS = 10_000;

export class ToolCatalog implements ToolLookup {
  readonly #toolbox: Toolbox;
  readonly #timeoutMs: number;
  readonly #connect: boolean;
  readonly #asked = new Map<string, Promise<ServerTools>>();

  /** `connect: false` lists only the built-ins (MCP servers are reported as unchecked). */
  constructor(toolbox: Toolbox, opts: { timeoutMs?: number; connect?: boolean } = {}) {
    this.#toolbox = toolbox;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_LIST_TIMEOUT_MS;
    this.#connect = opts.connect ?? true;
  }

  tools(prefix: string): Promise<ServerTools> {
    let asked = this.#asked.get(prefix);
    if (!asked) {
      asked = this.#list(prefix);
      this.#asked.set(prefix, asked);
    }
    return asked;
  }

  async #list(prefix: string): Promise<ServerTools> {
    if (BUILTIN_PREFIXES.includes(prefix)) {
      return { state: 'listed', builtin: true, tools: (await this.#toolbox.registry.listOf(prefix)) ?? [] };
    }
    if (this.#toolbox.configPath === undefined) return { state: 'unchecked' };
    if (this.#toolbox.workers.some((w) => w.prefix === prefix)) return { state: 'worker' };
    const provider = this.#toolbox.mcp.find((p) => p.prefix === prefix);
    if (!provider) return { state: 'unknown', servers: this.#toolbox.mcp.map((p) => p.prefix) };
    if (!this.#connect) return { state: 'unchecked' };
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<ServerTools>((resolve) => {
      timer = setTimeout(() => resolve({ state: 'unreachable', error: `no answer within ${this.#timeoutMs} ms` }), this.#timeoutMs);
    });
    const listed = provider.probe().then((r): ServerTools => (r.ok ? { state: 'listed', builtin: false, tools: r.tools ?? [] } : { state: 'unreachable', error: r.error ?? 'unknown error' }));
    return Promise.race([listed, deadline]).finally(() => clearTimeout(timer));
  }
}
