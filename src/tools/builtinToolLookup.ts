/**
 * The built-in tools alone (core.*, http.request, llm.chat), as a ToolLookup, without loading the toolbox
 * and its MCP client: what `stepd run` checks a flow against when the flow calls no MCP server,
 * or when no configuration names any. Other prefixes are `unchecked` (left to run time).
 */
import { CoreTools } from './builtins.js';
import type { ToolProvider } from './tool.js';
import { BUILTIN_PREFIXES, type ServerTools, type ToolLookup } from './toolCatalog.js';

export class BuiltinToolLookup implements ToolLookup {
  async tools(prefix: string): Promise<ServerTools> {
    if (!BUILTIN_PREFIXES.includes(prefix)) return { state: 'unchecked' };
    return { state: 'listed', builtin: true, tools: await (await builtinProvider(prefix)).list() };
  }
}

/** The provider of a built-in prefix, for its list of tools (heavy ones loaded only when asked). */
async function builtinProvider(prefix: string): Promise<Pick<ToolProvider, 'list'>> {
  switch (prefix) {
    case 'core':
      return new CoreTools();
    case 'llm':
      return new (await import('./llm/llmTool.js')).LlmToolProvider();
    case 'http':
      return new (await import('./httpTool.js')).HttpToolProvider();
    default:
      throw new Error(`no built-in tools under "${prefix}"`);
  }
}

/** The server prefixes a compiled flow's steps call (the part of each tool name before its first dot). */
export function toolPrefixesOf(steps: Iterable<{ tool: string | null }>): Set<string> {
  const prefixes = new Set<string>();
  for (const s of steps) if (s.tool !== null && s.tool.indexOf('.') > 0) prefixes.add(s.tool.slice(0, s.tool.indexOf('.')));
  return prefixes;
}
