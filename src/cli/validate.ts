/** `stepd validate FLOW.json`: every issue of a flow with its JSON path; no database needed. */
import type { Command } from 'commander';
import { compileFlow } from '../flow/validate.js';
import { resolveCaps } from '../flow/caps.js';
import { EXIT, out, outJson, readJsonFile } from './common.js';

export function registerValidate(program: Command): void {
  program
    .command('validate')
    .description('check a flow file the way the executor does (shape, then the graph) and print every issue with its path')
    .argument('<flow...>', 'one or more flow JSON files')
    .option('--json', 'print [{file, valid, issues: [{path, message}]}] as JSON')
    .option('--config <path>', "check against this configuration file's caps (default: the built-in caps)")
    .addHelpText(
      'after',
      `
Examples:
  stepd validate examples/*.json
  stepd validate flow.json --json
  stepd validate flow.json --config stepd.config.json   # the operator's caps

Exit code 0 when every file is valid, 1 otherwise.`,
    )
    .action(async (files: string[], flags: { json?: boolean; config?: string }) => {
      const { loadToolConfig } = await import('../tools/toolbox.js');
      const caps = resolveCaps(flags.config ? (await loadToolConfig(flags.config)).config.caps : undefined);
      const results: { file: string; valid: boolean; steps?: number; issues: { path: string; message: string }[] }[] = [];
      for (const file of files) {
        let flow: unknown;
        try {
          flow = await readJsonFile(file, 'flow file');
        } catch (err) {
          results.push({ file, valid: false, issues: [{ path: '', message: (err as Error).message }] });
          continue;
        }
        const compiled = compileFlow(flow, { caps });
        results.push(compiled.ok ? { file, valid: true, steps: compiled.flow.steps.size, issues: [] } : { file, valid: false, issues: compiled.issues });
      }
      if (flags.json) {
        outJson(results);
      } else {
        for (const r of results) {
          if (r.valid) {
            out(`${r.file}: valid (${r.steps} steps)`);
            continue;
          }
          out(`${r.file}: ${r.issues.length} issue(s)`);
          for (const i of r.issues) out(`  ${i.path || '(flow)'}: ${i.message}`);
        }
      }
      process.exitCode = results.every((r) => r.valid) ? EXIT.ok : EXIT.invalid;
    });
}
