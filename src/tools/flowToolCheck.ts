/**
 * The tool check `stepd validate` makes, shared by everything that stores a workflow before the
 * executor sees it (`stepd run`, the MCP tools `start_workflow` and `validate_flow`): every
 * step's tool exists and the literal parts of its arguments match the tool's input schema.
 *
 * What can be known depends on where the check runs. The built-in tools (core.*, http.request)
 * are always known. MCP servers' tools are known only to a process that has the configuration
 * naming them (the daemon, or `stepd run`/`stepd mcp` started with the same stepd.config.json):
 * without a configuration their steps are left to run time (`unchecked`), and a server that
 * cannot be reached is a warning, never a refusal.
 */
import type { CompiledFlow } from '../flow/compiled.js';
import { ArgumentChecker } from './argumentChecker.js';
import { checkToolUse, type ToolUseReport } from './checkToolUse.js';
import type { ToolLookup } from './toolCatalog.js';

export type { ToolUseReport };

/** A fresh lookup per check (MCP servers' tool lists may change while a process runs). */
export type ToolLookupFactory = () => ToolLookup;

export async function checkFlowTools(flow: CompiledFlow, lookup: ToolLookup, checker: ArgumentChecker = new ArgumentChecker()): Promise<ToolUseReport> {
  return checkToolUse(flow, lookup, checker);
}
