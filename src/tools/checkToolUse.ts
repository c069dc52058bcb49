/**
 * The tool checks of `stepd validate`, after the flow itself is valid: every step's tool exists
 * (built-ins always; MCP tools when a config names their server), and the literal parts of its
 * arguments match the tool's input schema. A server that cannot be reached is a warning: its
 * steps are not checked, and the flow is not called invalid for it.
 */
import type { CompiledFlow } from '../flow/compiled.js';
import type { FlowIssue } from '../flow/spec.js';
import type { ArgumentChecker } from './argumentChecker.js';
import type { ToolLookup } from './toolCatalog.js';

export interface ToolUseReport {
  issues: FlowIssue[];
  warnings: FlowIssue[];
  /** Tools that could not be checked because no config was read (MCP servers unknown). */
  unchecked: string[];
}

const MAX_LISTED = 20;

export async function checkToolUse(flow: CompiledFlow, lookup: ToolLookup, checker: ArgumentChecker): Promise<ToolUseReport> {
  const report: ToolUseReport = { issues: [], warnings: [], unchecked: [] };
  const warnedServers = new Set<string>();
  // Every server the flow uses is asked at once, so unreachable ones cost one timeout, not one each.
  const prefixes = new Set([...flow.steps.values()].flatMap((s) => (s.tool !== null && s.tool.indexOf('.') > 0 ? [s.tool.slice(0, s.tool.indexOf('.'))] : [])));
  await Promise.all([...prefixes].map((p) => lookup.tools(p)));
  for (const step of flow.steps.values()) {
    if (step.tool === null) continue;
    const at = `steps.${step.name}`;
    const name = step.tool;
    const dot = name.indexOf('.');
    if (dot <= 0 || dot === name.length - 1) {
      report.issues.push({ path: `${at}.tool`, message: `"${name}" is not a tool name: tools are named "server.tool" (core.echo, http.request, kb.search)` });
      continue;
    }
    const prefix = name.slice(0, dot);
    const tool = name.slice(dot + 1);
    const server = await lookup.tools(prefix);
    switch (server.state) {
      case 'unchecked':
        report.unchecked.push(name);
        continue;
      case 'worker':
        continue;
      case 'unknown':
        report.issues.push({
          path: `${at}.tool`,
          message: `unknown tool "${name}": there is no MCP server "${prefix}" in the configuration (${server.servers.length ? `its servers: ${server.servers.join(', ')}` : 'it has no mcpServers'}; built in: core, http)`,
        });
        continue;
      case 'unreachable':
        if (!warnedServers.has(prefix)) {
          warnedServers.add(prefix);
          report.warnings.push({ path: `${at}.tool`, message: `${unreachable(prefix, server.error)}; its tools and their arguments were not checked` });
        }
        continue;
      case 'listed': {
        const info = server.tools.find((t) => t.name === tool);
        if (!info) {
          const names = server.tools.map((t) => `${prefix}.${t.name}`).sort();
          const listed = names.length > MAX_LISTED ? `${names.slice(0, MAX_LISTED).join(', ')}, … (${names.length} in all)` : names.join(', ');
          const owner = server.builtin ? `the built-in "${prefix}" tools are` : `MCP server "${prefix}" has`;
          report.issues.push({ path: `${at}.tool`, message: `unknown tool "${name}": ${owner} ${listed || 'no tools'}` });
          continue;
        }
        const checked = checker.check({ tool: name, schema: info.inputSchema, args: step.spec.args, at: `${at}.args` });
        report.issues.push(...checked.issues);
        report.warnings.push(...checked.warnings);
      }
    }
  }
  return report;
}

function unreachable(prefix: string, error: string): string {
  return error.startsWith(`MCP server "${prefix}"`) ? error : `MCP server "${prefix}" could not be reached (${error})`;
}
