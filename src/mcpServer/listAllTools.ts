/**
 * Every tool a flow can call: the built-ins (`core.*`, `http.request`) and each configured MCP
 * server's (listing connects; a server that does not answer within `timeoutMs` is reported in
 * `failures`, not waited for). `servers` narrows the MCP servers asked (those the caller may call
 * a tool of: the others are neither connected nor started). Everything listed is redacted of the
 * config's secrets (the providers already redact their listings; this covers the failures too).
 */
import { CoreTools } from '../tools/builtins.js';
import { HttpToolProvider } from '../tools/httpTool.js';
import type { ToolInfo } from '../tools/tool.js';
import type { McpServerProvider } from '../tools/mcp/index.js';
import type { Secrets } from '../secrets.js';

export const LIST_TOOLS_TIMEOUT_MS = 10_000;

export interface ListedTools {
  tools: ToolInfo[];
  failures: { server: string; error: string }[];
}

export interface ListAllToolsOptions {
  timeoutMs?: number;
  /** Which MCP servers to ask (default: all). */
  servers?: (prefix: string) => boolean;
}

export async function listAllTools(toolbox: { mcp: readonly McpServerProvider[]; secrets?: Secrets }, opts: ListAllToolsOptions = {}): Promise<ListedTools> {
  const timeoutMs = opts.timeoutMs ?? LIST_TOOLS_TIMEOUT_MS;
  const tools: ToolInfo[] = [];
  for (const p of [new CoreTools(), new HttpToolProvider()]) tools.push(...(await p.list()).map((t) => ({ ...t, name: `${p.prefix}.${t.name}` })));
  const failures: { server: string; error: string }[] = [];
  const asked = opts.servers ? toolbox.mcp.filter((p) => opts.servers!(p.prefix)) : toolbox.mcp;
  const listed = await Promise.all(
    asked.map(async (p) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        return { prefix: p.prefix, tools: await Promise.race([p.list(), late]) };
      } catch (err) {
        return { prefix: p.prefix, error: err instanceof Error ? err.message : String(err) };
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  for (const l of listed) {
    if ('error' in l) failures.push({ server: l.prefix, error: l.error! });
    else tools.push(...l.tools.map((t) => ({ ...t, name: `${l.prefix}.${t.name}` })));
  }
  const all = { tools, failures };
  return toolbox.secrets ? toolbox.secrets.redactValue(all) : all;
}
