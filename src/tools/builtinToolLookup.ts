/**
 * The built-in tools alone (core.*, http.request), as a ToolLookup, without loading the toolbox
 * and its MCP client: what `stepd run` checks a flow against when the flow calls no MCP server,
 * or when no configuration names any. Other prefixes are `unchecked` (left to run time).
 */
import { CoreTools } from './builtins.js';
import { BUILTIN_PREFIXES, type ServerTools, type ToolLookup } from './toolCatalog.js';

export class BuiltinToolLookup implements ToolLookup {
  async tools(prefix: string): Promise<ServerTools> {
    if (!BUILTIN_PREFIXES.includes(prefix)) return { state: 'unchecked' };
    const provider = prefix === 'core' ? new CoreTools() : new (await import('./httpTool.js')).HttpToolProvider();
    return { state: 'listed', builtin: true, tools: await provider.list() };
  }
}

/** The server prefixes a compiled flow's steps call (the part of each tool name before its first dot). */
export function toolPrefixesOf(steps: Iterable<{ tool: string | null }>): Set<string> {
  const prefixes = new Set<string>();
  for (const s of steps) if (s.tool !== null && s.tool.indexOf('.') > 0) prefixes.add(s.tool.slice(0, s.tool.indexOf('.')));
  return prefixes;
}
