/**
 * `stepd validate FLOW.json`: every issue of a flow with its JSON path; no database needed.
 * With a configuration (--config, or ./stepd.config.json) it also asks the MCP servers the flows
 * use for their tools: unknown tool names and literal arguments that do not match a tool's input
 * schema are issues; a server that cannot be reached is a warning.
 */
import type { Command } from 'commander';
import { compileFlow } from '../flow/validate.js';
import type { FlowIssue } from '../flow/spec.js';
import { EXIT, out, outJson, readJsonFile } from './common.js';
import { openToolCheck } from './toolCheckSetup.js';

interface ValidateFlags {
  json?: boolean;
  config?: string;
  offline?: boolean;
}

interface FileResult {
  file: string;
  valid: boolean;
  steps?: number;
  issues: FlowIssue[];
  warnings: FlowIssue[];
}

export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description('check a flow file the way the executor does (shape, the graph, the tools it calls) and print every issue with its path')
    .argument('<flow...>', 'one or more flow JSON files')
    .option('--json', 'print [{file, valid, issues: [{path, message}], warnings: [{path, message}]}] as JSON')
    .option('--config <path>', 'configuration file: its caps and MCP servers (default: ./stepd.config.json if present, else built-in caps and tools only)')
    .option('--offline', 'do not connect to MCP servers: check the built-in tools only')
    .addHelpText(
      'after',
      `
Tools: a step's tool must exist. The built-ins (core.*, http.request) are always checked; MCP
tools are checked when a configuration is found: stepd connects to each server a flow uses, lists
its tools, and checks the literal parts of the step's arguments against the tool's input schema
(templated values such as "{{input.url}}" are left to run time). A server that cannot be reached
is reported as a warning and its steps are not checked.

Examples:
  stepd validate examples/*.json
  stepd validate flow.json --json
  stepd validate flow.json --config stepd.config.json   # the operator's caps and MCP servers
  stepd validate flow.json --offline                    # no MCP connections

Exit code 0 when every file is valid (warnings do not count), 1 otherwise.`,
    )
    .action(async (files: string[], flags: ValidateFlags) => {
      const { ArgumentChecker } = await import('../tools/argumentChecker.js');
      const { checkFlowTools } = await import('../tools/flowToolCheck.js');
      const { checkModelProviders } = await import('../tools/llm/checkModels.js');
      const setup = await openToolCheck(flags);
      const { caps, catalog } = setup;
      const checker = new ArgumentChecker();
      const results: FileResult[] = [];
      const unchecked = new Set<string>();
      try {
        for (const name of files) {
          let flow: unknown;
          try {
            flow = await readJsonFile(name, 'flow file');
          } catch (err) {
            results.push({ file: name, valid: false, issues: [{ path: '', message: (err as Error).message }], warnings: [] });
            continue;
          }
          const compiled = compileFlow(flow, { caps });
          if (!compiled.ok) {
            results.push({ file: name, valid: false, issues: compiled.issues, warnings: [] });
            continue;
          }
          const tools = await checkFlowTools(compiled.flow, catalog, checker);
          const models = checkModelProviders(compiled.flow, setup.llm, setup.configFound);
          tools.issues.push(...models.issues);
          tools.warnings.push(...models.warnings);
          for (const t of tools.unchecked) unchecked.add(t);
          results.push({ file: name, valid: tools.issues.length === 0, steps: compiled.flow.steps.size, issues: tools.issues, warnings: tools.warnings });
        }
      } finally {
        await setup.close();
      }
      setup.noteUnchecked(unchecked);
      if (flags.json) {
        outJson(results);
      } else {
        for (const r of results) {
          if (r.valid) out(`${r.file}: valid (${r.steps} steps)${r.warnings.length ? `, ${r.warnings.length} warning(s)` : ''}`);
          else out(`${r.file}: ${r.issues.length} issue(s)`);
          for (const i of r.issues) out(`  ${i.path || '(flow)'}: ${i.message}`);
          for (const w of r.warnings) out(`  warning: ${w.path || '(flow)'}: ${w.message}`);
        }
      }
      process.exitCode = results.every((r) => r.valid) ? EXIT.ok : EXIT.invalid;
    });
}
