/**
 * Tool patterns of the config (`permissions`, `limits.tools`, `limits.rates`): one function that
 * every reader of them shares, below the config file and the policies built from it.
 */
/**
 * Whether a full tool name (`kb.search`) matches a pattern: `*` matches every tool, a pattern
 * ending in `*` matches by prefix (`kb.*`), anything else must be equal.
 */
export function matchesToolPattern(pattern: string, tool: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return tool.startsWith(pattern.slice(0, -1));
  return pattern === tool;
}
