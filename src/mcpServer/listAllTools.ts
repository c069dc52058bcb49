/**
 * Every tool a flow can call: the built-ins (`core.*`, `http.request`) and each configured MCP
 * server's (listing connects; a server that does not answer within `timeoutMs` is reported in
 * `failures`, not waited for).
 */
import { CoreTools } from '../tools/builtins.js';
import { HttpToolProvider } from '../tools/httpTool.js';
import type { ToolInfo } from '../tools/tool.js';
import type { McpServerProvider } from '../tools/mcp/index.js';

export const LIST_TOOLS_TIMEOUT_MS = 10_000;

export async function listAllTools(
  toolbox: { mcp: readonly McpServerProvider[] },
  timeoutMs = LIST_TOOLS_TIMEOUT_MS,
): Promise<{ tools: ToolInfo[]; failures: { server: string; error: string }[] }> {
  const tools: ToolInfo[] = [];
  for (const p of [new CoreTools(), new HttpToolProvider()]) tools.push(...(await p.list()).map((t) => ({ ...t, name: `${p.prefix}.${t.name}` })));
  const failures: { server: string; error: string }[] = [];
  const listed = await Promise.all(
    toolbox.mcp.map(async (p) => {
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
  return { tools, failures };
}
