/**
 * Everything a step's tool call goes through, built once at start-up from the config file:
 * the registry (core.*, http.request, one provider per MCP server), permissions and limits.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { loadConfigFile, type StepdFileConfig } from '../configFile.js';
import type { Logger } from '../logger.js';
import { Secrets } from '../secrets.js';
import { CoreTools } from './builtins.js';
import { EgressPolicy } from './egress.js';
import { HttpToolProvider } from './httpTool.js';
import { LlmToolProvider } from './llm/llmTool.js';
import { createLimitPolicy, type LimitPolicy } from './limits.js';
import { createMcpProviders, type McpServerProvider } from './mcp/index.js';
import { createPermissionPolicy, type PermissionPolicy } from './permissions.js';
import { ToolRegistry } from './registry.js';
import type { ToolProvider } from './tool.js';
import { workerPrefixes, type WorkerPrefix } from '../workers/workersConfig.js';
import { WorkerToolProvider } from '../workers/workerTools.js';

export const DEFAULT_CONFIG_FILE = 'stepd.config.json';

export interface Toolbox {
  config: StepdFileConfig;
  /** The file it came from, or undefined when none was found (defaults apply). */
  configPath: string | undefined;
  registry: ToolRegistry;
  permissions: PermissionPolicy;
  limits: LimitPolicy;
  mcp: McpServerProvider[];
  /** Tool prefixes served by workers (config `workers`). */
  workers: WorkerPrefix[];
  /** The config's `${VAR}` values, redacted from every tool result, error and (given to createLogger) log line. */
  secrets: Secrets;
}

/**
 * Loads `--config PATH` (must exist) or ./stepd.config.json (if present). The values its
 * `${VAR}`s expanded to are added to `secrets` (pass the one the logger redacts).
 */
export async function loadToolConfig(
  explicitPath: string | undefined,
  cwd = process.cwd(),
  secrets: Secrets = new Secrets(),
): Promise<{ config: StepdFileConfig; path?: string; secrets: Secrets }> {
  if (explicitPath) {
    const file = path.resolve(cwd, explicitPath);
    return { config: await loadConfigFile(file, process.env, secrets), path: file, secrets };
  }
  const candidate = path.join(cwd, DEFAULT_CONFIG_FILE);
  if (existsSync(candidate)) return { config: await loadConfigFile(candidate, process.env, secrets), path: candidate, secrets };
  return { config: {}, secrets };
}

export interface ToolboxOptions {
  mcpIdleMs?: number;
  /** The config's `${VAR}` values (from loadToolConfig); none when omitted. */
  secrets?: Secrets;
  /** More providers beside the built-ins and MCP servers (the library's function tools). */
  providers?: ToolProvider[];
}

export function buildToolbox(config: StepdFileConfig, configPath: string | undefined, log: Logger, opts: ToolboxOptions = {}): Toolbox {
  const secrets = opts.secrets ?? new Secrets();
  const mcp = createMcpProviders(config.mcpServers, { log, secrets, ...(opts.mcpIdleMs !== undefined ? { idleMs: opts.mcpIdleMs } : {}) });
  const egress = new EgressPolicy({ policy: config.http });
  const http = new HttpToolProvider({ log, secrets, egress });
  // An API key written into the file (not a ${VAR}) is a secret all the same.
  for (const p of Object.values(config.llm?.providers ?? {})) if (p.apiKey) secrets.add(p.apiKey);
  const llm = new LlmToolProvider({ config: config.llm, egress, secrets, log });
  const workers = workerPrefixes(config.workers);
  const registry = new ToolRegistry([new CoreTools(), http, llm, ...mcp, ...workers.map((w) => new WorkerToolProvider(w)), ...(opts.providers ?? [])], { secrets });
  return {
    secrets,
    config,
    configPath,
    registry,
    permissions: createPermissionPolicy(config.permissions),
    limits: createLimitPolicy(config.limits),
    mcp,
    workers,
  };
}

/** How long the start-up report waits for a server before saying it did not answer (yet). */
export const DEFAULT_PROBE_TIMEOUT_MS = 10_000;

/**
 * Connects to every MCP server once and logs whether it answered (start-up report). A server
 * that has not answered within `timeoutMs` is reported as not answering, so one hung server
 * cannot hold up the start; its connection attempt goes on and steps use it once it is open.
 */
export async function probeMcpServers(
  toolbox: Toolbox,
  log: Logger,
  opts: { timeoutMs?: number } = {},
): Promise<{ server: string; ok: boolean; tools?: number; error?: string }[]> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const report = await Promise.all(
    toolbox.mcp.map(async (p) => {
      const r = await withDeadline(p.probe(), timeoutMs, { ok: false, error: `no answer within ${timeoutMs} ms (still connecting)` });
      return { server: p.prefix, ok: r.ok, ...(r.tools ? { tools: r.tools.length } : {}), ...(r.error ? { error: String(r.error) } : {}) };
    }),
  );
  for (const r of report) {
    if (r.ok) log.info({ server: r.server, tools: r.tools }, 'MCP server answered');
    else log.warn({ server: r.server, error: r.error }, 'MCP server did not answer; its steps will retry');
  }
  return report;
}

/** `promise`'s value, or `fallback` when it has not settled within `ms` (the promise goes on). */
function withDeadline<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
